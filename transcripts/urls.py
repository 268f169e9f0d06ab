from django.urls import path

from transcripts import views

app_name = "transcripts"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("overview/", views.overview_page, name="overview"),
    path("search/", views.content_search, name="content_search"),
    path("sessions/upload/", views.upload, name="upload"),
    path("sessions/<int:pk>/", views.session_detail, name="session_detail"),
    path("sessions/<int:pk>/compare/", views.session_compare, name="session_compare"),
    path("sessions/<int:pk>/resume/", views.resume_preview, name="resume_preview"),
    path("sessions/<int:pk>/delete/", views.delete_session, name="delete_session"),
    path("sessions/dismiss-unreadable/", views.dismiss_unreadable, name="dismiss_unreadable"),
    path("sessions/<int:pk>/rows/", views.session_rows, name="session_rows"),
    path("sessions/<int:pk>/records/<int:index>/", views.record_detail, name="record_detail"),
    path(
        "sessions/<int:pk>/revisions/<int:number>/download/",
        views.download_revision,
        name="download_revision",
    ),
    path("sessions/<int:pk>/repaired/", views.download_repaired, name="download_repaired"),
    path("jobs/", views.start_repair, name="start_repair"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/cancel/", views.cancel_job, name="cancel_job"),
    path("jobs/<int:pk>/retry/", views.retry_job, name="retry_job"),
    path("jobs/<int:pk>/rollback/", views.rollback_job, name="rollback_job"),
    path("jobs/<int:pk>/rollback/confirm/", views.confirm_rollback, name="confirm_rollback"),
    path("jobs/<int:pk>/apply/", views.apply_dry_run, name="apply_dry_run"),
    path("jobs/<int:pk>/archive/", views.download_archive, name="download_archive"),
    path("workspaces/", views.workspace_list, name="workspace_list"),
    path("workspaces/<int:pk>/members/", views.workspace_members, name="workspace_members"),
    path("workspaces/<int:pk>/invitations/", views.create_invitation, name="create_invitation"),
    path(
        "workspaces/<int:pk>/invitations/<int:invitation>/revoke/",
        views.revoke_invitation,
        name="revoke_invitation",
    ),
    path("sources/", views.source_list, name="source_list"),
    path("sources/<int:pk>/", views.source_detail, name="source_detail"),
    path("sources/<int:pk>/sync/", views.sync_source_now, name="sync_source_now"),
    path("sources/<int:pk>/settings/", views.source_settings, name="source_settings"),
    path("audit/", views.audit_list, name="audit_list"),
    path("audit/export.csv", views.audit_export, {"format": "csv"}, name="audit_export_csv"),
    path("audit/export.jsonl", views.audit_export, {"format": "jsonl"}, name="audit_export_jsonl"),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("policies/", views.policies, name="policies"),
    path("policies/<int:pk>/", views.policy_edit, name="policy_edit"),
    path("tokens/new/", views.create_api_token, name="create_api_token"),
    path("tokens/<int:pk>/revoke/", views.revoke_api_token, name="revoke_api_token"),
    path(
        "tokens/<int:pk>/revoke/confirm/",
        views.confirm_revoke_api_token,
        name="confirm_revoke_api_token",
    ),
]
