"""Every page and download that shows transcript content says no cache may keep it."""

import pytest
from django.urls import get_resolver, reverse

from tests.api.conftest import client_for
from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.models import Job

pytestmark = pytest.mark.django_db

# Every URL name of the dashboard that answers GET, with what to fill its path with.
PAGES = {
    "session_list": lambda s, j: [],
    "overview": lambda s, j: [],
    "session_detail": lambda s, j: [s.pk],
    "session_rows": lambda s, j: [s.pk],
    "record_detail": lambda s, j: [s.pk, 3],
    "download_revision": lambda s, j: [s.pk, 0],
    "download_repaired": lambda s, j: [s.pk],
    "job_detail": lambda s, j: [j.pk],
    "download_archive": lambda s, j: [j.pk],
    "audit_list": lambda s, j: [],
    "audit_export_csv": lambda s, j: [],
    "audit_export_jsonl": lambda s, j: [],
    "audit_events_csv": lambda s, j: [],
    "audit_events_jsonl": lambda s, j: [],
    "workspace_list": lambda s, j: [],
    "source_list": lambda s, j: [],
    "api_tokens": lambda s, j: [],
    "policies": lambda s, j: [],
    "content_search": lambda s, j: [],
    "session_compare": lambda s, j: [s.pk],
    "resume_preview": lambda s, j: [s.pk],
    "delete_session": lambda s, j: [s.pk],
    "dismiss_unreadable": lambda s, j: [],
}
# Questions asked before an action that show no transcript content (the middleware
# marks them too; their objects need fixtures of their own).
CONFIRMATIONS = {"confirm_rollback", "confirm_revoke_api_token"}
# Those that only take a POST.
POST_ONLY = {
    "upload",
    "start_repair",
    "cancel_job",
    "retry_job",
    "rollback_job",
    "apply_dry_run",
    "sync_source_now",
    "source_settings",
    "create_api_token",
    "revoke_api_token",
    "create_invitation",
    "revoke_invitation",
    "index_sessions",
}


def _no_store(response) -> bool:
    directives = {d.strip() for d in response.get("Cache-Control", "").split(",")}
    return {"private", "no-store"} <= directives


@pytest.fixture
def exported(alice, workspace):
    session = actions.do_ingest_session(
        workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"), acting_user=alice
    )
    job = actions.do_start_job(
        workspace, [session], kind=Job.Kind.EXPORT, policy="synthesize", acting_user=alice
    )
    return session, run_inline(job)


def test_every_page_is_listed():
    names = {
        p.name
        for p in get_resolver().url_patterns[0].url_patterns  # transcripts.urls
    }
    unlisted = {"source_detail", "workspace_members", "policy_edit"} | CONFIRMATIONS
    assert names - POST_ONLY - unlisted == set(PAGES)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_page_with_transcript_content_is_never_stored(alice_client, exported, name):
    session, job = exported
    alice_client.get(session.get_absolute_url())  # builds the timeline the rows come from
    if name == "dismiss_unreadable":  # it asks only when there is an unreadable upload
        actions.do_ingest_session(
            session.workspace, "notes.txt", b"not a session", acting_user=session.created_by
        )
    response = alice_client.get(reverse(f"transcripts:{name}", args=PAGES[name](session, job)))
    response.close()
    assert response.status_code == 200
    assert _no_store(response), response.get("Cache-Control")


def test_the_members_page_is_never_stored(alice_client, workspace):
    response = alice_client.get(reverse("transcripts:workspace_members", args=[workspace.pk]))
    assert (response.status_code, _no_store(response)) == (200, True)


@pytest.mark.parametrize(
    "path",
    [
        "/api/sessions",
        "/api/sessions/{s}",
        "/api/sessions/{s}/faults",
        "/api/sessions/{s}/revisions",
        "/api/sessions/{s}/revisions/0/content",
        "/api/jobs/{j}",
        "/api/jobs/{j}/archive",
    ],
)
def test_the_api_never_lets_a_cache_keep_content(alice, workspace, exported, path):
    session, job = exported
    _, secret = actions.do_create_api_token(workspace, "runtime", acting_user=alice)
    response = client_for(secret).get(path.format(s=session.pk, j=job.pk))
    response.close()
    assert response.status_code == 200
    assert _no_store(response), response.get("Cache-Control")
