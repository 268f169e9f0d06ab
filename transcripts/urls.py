from django.urls import path

from transcripts import views

app_name = "transcripts"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("sessions/upload/", views.upload, name="upload"),
    path("sessions/<int:pk>/", views.session_detail, name="session_detail"),
    path(
        "sessions/<int:pk>/revisions/<int:number>/download/",
        views.download_revision,
        name="download_revision",
    ),
    path("sessions/<int:pk>/repaired/", views.download_repaired, name="download_repaired"),
    path("jobs/", views.start_repair, name="start_repair"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
]
