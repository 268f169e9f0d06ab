"""A folder belongs to one workspace: granted by a site admin, followed by one source.

Before, the overlap check looked only at the workspace's own sources: an
admin of another workspace could follow (and write back to) the same folder.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from tests.sync.conftest import age, call, result, user
from transcripts.actions import sync
from transcripts.models import AuditRecord, SyncGrant, SyncSource

START = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
ANSWER = result("u2", "a1", "toolu_1")


@pytest.fixture
def shared_root(tmp_path: Path, settings) -> Path:
    """Return a sync root whose folder `projects` is granted to both workspaces."""
    settings.SYNC_ROOTS = [tmp_path.resolve()]
    (tmp_path / "projects" / "inner").mkdir(parents=True)
    return tmp_path.resolve()


@pytest.mark.django_db
def test_another_workspace_cannot_follow_a_folder_that_is_followed(
    shared_root, workspace, other_workspace, alice, bob
):
    for granted_to in (workspace, other_workspace):
        sync.do_grant_folder(granted_to, str(shared_root), acting_user=None)
    projects = shared_root / "projects"
    sync.do_create_source(workspace, str(projects), acting_user=alice)

    for path in (projects, projects / "inner", shared_root):
        with pytest.raises(sync.SyncError, match="a folder another workspace follows") as caught:
            sync.do_create_source(other_workspace, str(path), acting_user=bob)
        assert workspace.name not in str(caught.value)
    assert list(SyncSource.objects.values_list("workspace", flat=True)) == [workspace.pk]


@pytest.mark.django_db
def test_a_workspace_follows_only_folders_granted_to_it(
    shared_root, workspace, other_workspace, bob
):
    sync.do_grant_folder(workspace, str(shared_root / "projects"), acting_user=None)

    with pytest.raises(sync.SyncError, match="not under a folder granted to Beta .none yet."):
        sync.do_create_source(other_workspace, str(shared_root / "projects"), acting_user=bob)
    with pytest.raises(sync.SyncError, match="not under an allowed sync root"):
        sync.do_grant_folder(other_workspace, "/etc", acting_user=None)
    assert not SyncSource.objects.exists()


@pytest.mark.django_db
def test_the_web_form_refuses_another_workspaces_folder(
    client, shared_root, workspace, other_workspace, alice, bob
):
    for granted_to in (workspace, other_workspace):
        sync.do_grant_folder(granted_to, str(shared_root), acting_user=None)
    sync.do_create_source(workspace, str(shared_root / "projects"), acting_user=alice)
    client.force_login(bob)

    response = client.post(
        "/sources/", {"workspace": other_workspace.pk, "path": str(shared_root / "projects")}
    )

    assert response.status_code == 400
    assert "is already a folder another workspace follows" in response.content.decode()
    assert SyncSource.objects.count() == 1


@pytest.mark.django_db
def test_a_grant_taken_back_stops_the_sources_syncs(source, root):
    SyncGrant.objects.filter(workspace=source.workspace).delete()
    (root / "s.jsonl").write_bytes(START)

    report = sync.do_sync_source(source.pk)

    source.refresh_from_db()
    assert report.new == 0
    assert "not under a folder granted to Alpha" in source.last_error
    assert source.claim is None


@pytest.mark.django_db(transaction=True)
def test_two_admins_adding_overlapping_folders_at_once_cannot_both_win(
    shared_root, workspace, other_workspace, alice, bob
):
    for granted_to in (workspace, other_workspace):
        sync.do_grant_folder(granted_to, str(shared_root), acting_user=None)
    projects = shared_root / "projects"
    rounds = 5
    for n in range(rounds):
        (projects / f"r{n}" / "inner").mkdir(parents=True)
    barrier = threading.Barrier(2)

    def add(args: tuple) -> str:
        ws, who, path = args
        try:
            barrier.wait(timeout=30)
            sync.do_create_source(ws, str(path), acting_user=who)
            return "added"
        except sync.SyncError:
            return "refused"
        finally:
            connection.close()

    for n in range(rounds):
        folder = projects / f"r{n}"
        with ThreadPoolExecutor(2) as pool:
            outcomes = list(
                pool.map(
                    add, [(workspace, alice, folder), (other_workspace, bob, folder / "inner")]
                )
            )
        assert sorted(outcomes) == ["added", "refused"]
    assert SyncSource.objects.count() == rounds


@pytest.mark.django_db
def test_every_audit_record_of_a_sync_names_the_source_and_who_added_it(source, root, alice):
    path = root / "s.jsonl"
    path.write_bytes(START)
    age(path)
    sync.do_sync_source(source.pk)  # ingest
    with open(path, "ab") as f:
        f.write(ANSWER)
    age(path)
    sync.do_sync_source(source.pk)  # append
    path.write_bytes(user("u9", None, "other") + START)
    age(path)
    sync.do_sync_source(source.pk)  # rewrite
    path.rename(root / "t.jsonl")
    sync.do_sync_source(source.pk)  # rename
    (root / "t.jsonl").unlink()
    sync.do_sync_source(source.pk)  # gone

    records = AuditRecord.objects.order_by("id")
    assert [r.op for r in records] == ["ingest", "append", "rewrite", "rename", "delete"]
    assert {(r.source_id, r.acting_user_id) for r in records} == {(source.pk, alice.pk)}


@pytest.mark.django_db
def test_a_refusal_tells_nothing_of_folders_outside_the_grant(
    shared_root, workspace, other_workspace, bob
):
    sync.do_grant_folder(workspace, str(shared_root / "projects"), acting_user=None)
    sync.do_grant_folder(other_workspace, str(shared_root / "projects" / "inner"), acting_user=None)
    (shared_root / "projects" / "x").mkdir()
    answers = []
    for name in ("projects/x", "no-such-folder"):  # one exists, one does not
        with pytest.raises(sync.SyncError) as caught:
            sync.do_create_source(other_workspace, str(shared_root / name), acting_user=bob)
        answers.append(str(caught.value).replace(str(shared_root / name), "X"))
    assert answers[0] == answers[1]
    assert "not under a folder granted to Beta" in answers[0]


@pytest.mark.django_db
def test_the_sync_roots_hint_shows_the_path_as_given_not_where_it_leads(
    shared_root, tmp_path_factory, workspace, alice
):
    elsewhere = tmp_path_factory.mktemp("secret-place")
    link = tmp_path_factory.mktemp("links") / "to-somewhere"
    link.symlink_to(elsewhere)
    with pytest.raises(sync.SyncError, match="SYNC_ROOTS=") as caught:
        sync.do_create_source(workspace, str(link), acting_user=alice)
    assert str(link) in str(caught.value)
    assert "secret-place" not in str(caught.value)
