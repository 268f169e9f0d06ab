"""Every URL of the dashboard, walked as an outsider and as a viewer.

An outsider (no membership in the workspace) gets 404 for any object of it,
whatever the method; a viewer gets a refusal (403, or 405 for a read-only
URL) for every write. New URL names are picked up automatically: a name this
module cannot fill in fails the walk, so access is decided for each new page.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import Membership

pytestmark = pytest.mark.django_db

# URL names that take no object of a workspace (lists and forms of the user's own).
UNSCOPED = {
    "session_list",
    "overview",
    "upload",
    "start_repair",
    "audit_list",
    "audit_export_csv",
    "audit_export_jsonl",
    "audit_events_csv",
    "audit_events_jsonl",
    "source_list",
    "workspace_list",
    "api_tokens",
    "create_api_token",
    "content_search",
    "index_sessions",
    "dismiss_unreadable",
    "policies",
}


def url_names() -> list[str]:
    """Return every URL name of the transcripts app."""
    resolver = get_resolver()
    names = []
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver) and pattern.namespace == "transcripts":
            names += [p.name for p in pattern.url_patterns if isinstance(p, URLPattern) and p.name]
    return sorted(names)


@pytest.fixture
def bobs(bob: Any, other_workspace: Any, tmp_path: Any, settings: Any) -> dict[str, Any]:
    """Return one object of each kind in bob's workspace, by URL parameter meaning."""
    settings.SYNC_ROOTS = [tmp_path]
    session = actions.do_ingest_session(
        other_workspace, "bob.jsonl", sample("formats/claude_code.jsonl"), acting_user=bob
    )
    job = run_inline(
        actions.do_start_job(other_workspace, [session], policy="synthesize", acting_user=bob)
    )
    export = run_inline(
        actions.do_start_job(
            other_workspace, [session], kind="export", policy="synthesize", acting_user=bob
        )
    )
    (tmp_path / "bobs-folder").mkdir()
    sync.do_grant_folder(other_workspace, str(tmp_path / "bobs-folder"), acting_user=None)
    source = sync.do_create_source(other_workspace, str(tmp_path / "bobs-folder"), acting_user=bob)
    token, _ = actions.do_create_api_token(other_workspace, "bobs-token", acting_user=bob)
    policy = actions.do_save_workspace_policy(
        other_workspace, "bobs-policy", {"missing_result": "drop"}, "", "", acting_user=bob
    )
    invitation, _ = actions.do_create_invitation(other_workspace, "admin", acting_user=bob)
    return {
        "policy": policy,
        "token": token,
        "invitation": invitation,
        "session": session,
        "job": job,
        "export": export,
        "source": source,
        "workspace": other_workspace,
    }


def object_urls(objects: dict[str, Any]) -> dict[str, str]:
    """Return {URL name: URL} for every name that takes an object, filled from `objects`."""
    session, job = objects["session"], objects["job"]
    filled = {
        "session_detail": (session.pk,),
        "session_rows": (session.pk,),
        "record_detail": (session.pk, 1),
        "download_revision": (session.pk, 0),
        "download_repaired": (session.pk,),
        "job_detail": (job.pk,),
        "cancel_job": (job.pk,),
        "retry_job": (job.pk,),
        "rollback_job": (job.pk,),
        "apply_dry_run": (job.pk,),
        "download_archive": (objects["export"].pk,),
        "source_detail": (objects["source"].pk,),
        "sync_source_now": (objects["source"].pk,),
        "source_settings": (objects["source"].pk,),
        "workspace_members": (objects["workspace"].pk,),
        "revoke_api_token": (objects["token"].pk,),
        "policy_edit": (objects["policy"].pk,),
        "create_invitation": (objects["workspace"].pk,),
        "revoke_invitation": (objects["workspace"].pk, objects["invitation"].pk),
        "confirm_revoke_api_token": (objects["token"].pk,),
        "confirm_rollback": (job.pk,),
        "session_compare": (session.pk,),
        "resume_preview": (session.pk,),
        "delete_session": (session.pk,),
    }
    missing = set(url_names()) - UNSCOPED - set(filled)
    assert not missing, f"decide the access of these URL names in test_access: {missing}"
    return {name: reverse(f"transcripts:{name}", args=args) for name, args in filled.items()}


def test_an_outsider_finds_none_of_another_workspaces_objects(alice_client, bobs):
    for name, url in object_urls(bobs).items():
        for method in ("get", "post"):
            status = getattr(alice_client, method)(url).status_code
            # 405 (the method is checked before any lookup) tells nothing either.
            assert status in (404, 405), f"{method.upper()} {name} {url}: {status}"


def test_an_outsider_sees_nothing_of_another_workspace_in_the_lists(alice_client, bobs):
    for name in sorted(UNSCOPED):
        response = alice_client.get(reverse(f"transcripts:{name}"))
        if response.status_code == 405:
            continue
        body = b"".join(response) if response.streaming else response.content
        assert b"bob.jsonl" not in body, name
        assert bobs["source"].path.encode() not in body, name
        assert b"bobs-token" not in body, name
        assert b"bobs-policy" not in body, name


def test_a_viewer_is_refused_every_write(client, alice, bobs):
    Membership.objects.create(user=alice, workspace=bobs["workspace"], role="viewer")
    client.force_login(alice)
    refused = {name: client.post(url).status_code for name, url in object_urls(bobs).items()}
    # Read-only pages answer POST with 405; every write with 403.
    assert {n: s for n, s in refused.items() if s not in (403, 405)} == {}
    assert {n for n, s in refused.items() if s == 403} == {
        "cancel_job",
        "retry_job",
        "rollback_job",
        "apply_dry_run",
        "sync_source_now",
        "source_settings",
        "workspace_members",
        "revoke_api_token",
        "policy_edit",
        "create_invitation",
        "revoke_invitation",
        "delete_session",
    }
    session = bobs["session"]
    upload = client.post("/sessions/upload/", {"workspace": bobs["workspace"].pk})
    assert upload.status_code == 403
    repair = client.post("/jobs/", {"sessions": [session.pk], "policy": "synthesize"})
    assert repair.status_code == 403
    assert session.revisions.count() == 2  # bob's repair only


def test_one_who_edits_no_workspace_may_not_dismiss_unreadable_uploads(
    client, django_user_model, bobs
):
    carol = django_user_model.objects.create_user("carol", password="carol-password")
    Membership.objects.create(user=carol, workspace=bobs["workspace"], role="viewer")
    client.force_login(carol)
    url = reverse("transcripts:dismiss_unreadable")
    assert (client.get(url).status_code, client.post(url).status_code) == (403, 403)


def test_a_viewer_may_read_and_export(client, alice, bobs):
    Membership.objects.create(user=alice, workspace=bobs["workspace"], role="viewer")
    client.force_login(alice)
    session = bobs["session"]

    assert client.get(session.get_absolute_url()).status_code == 200
    assert client.get(f"/sessions/{session.pk}/revisions/0/download/").status_code == 200
    export = client.post(
        "/jobs/", {"sessions": [session.pk], "policy": "synthesize", "kind": "export"}
    )
    assert export.status_code == 302


def test_an_editor_may_repair_but_not_administer(client, alice, bobs):
    Membership.objects.create(user=alice, workspace=bobs["workspace"], role="editor")
    client.force_login(alice)

    assert client.post(f"/sources/{bobs['source'].pk}/sync/").status_code == 403
    response = client.post("/jobs/", {"sessions": [bobs["session"].pk], "policy": "synthesize"})
    assert response.status_code == 302


def test_a_viewer_is_offered_export_only_and_told_why_a_write_is_refused(client, alice, bobs):
    Membership.objects.create(user=alice, workspace=bobs["workspace"], role="viewer")
    client.force_login(alice)

    page = client.get("/").content.decode()
    assert 'value="export">Export zip' in page and 'value="repair"' not in page
    refused = client.post(f"/jobs/{bobs['job'].pk}/rollback/")
    assert refused.status_code == 403
    assert "Your role in this workspace does not allow that." in refused.content.decode()
