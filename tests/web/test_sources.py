import pytest

from tests.sync.conftest import call, user
from transcripts.actions import sync
from transcripts.models import Membership, Session, SyncSource, Workspace

pytestmark = pytest.mark.django_db

URL = "/sources/"
START = user("u1", None, "hi") + call("a1", "u1", "toolu_1")


@pytest.fixture
def root(tmp_path, settings):
    """Return a folder under the only sync root, granted to every workspace made before it."""
    settings.SYNC_ROOTS = [tmp_path.resolve()]
    folder = tmp_path / "projects"
    folder.mkdir()
    for granted_to in Workspace.objects.all():
        sync.do_grant_folder(granted_to, str(folder), acting_user=None)
    return folder


def test_an_owner_adds_a_folder_and_its_first_sync_is_queued(alice_client, workspace, root):
    (root / "s.jsonl").write_bytes(START)

    response = alice_client.post(
        URL, {"workspace": workspace.pk, "path": str(root), "format": "claude_code"}
    )

    source = SyncSource.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sources/{source.pk}/"
    assert (source.path, source.name, source.write_back) == (str(root), "projects", False)
    page = alice_client.get(response["Location"]).content.decode()
    assert "its first sync is queued" in page


def test_it_refuses_a_folder_outside_the_roots(alice_client, workspace, root, tmp_path, settings):
    settings.SYNC_ROOTS = [root]
    response = alice_client.post(URL, {"workspace": workspace.pk, "path": str(tmp_path)})
    assert response.status_code == 400
    assert "not under an allowed sync root" in response.content.decode()
    assert not SyncSource.objects.exists()


def test_it_says_when_no_roots_are_configured(alice_client, settings):
    settings.SYNC_ROOTS = []
    assert "an operator sets <code>SYNC_ROOTS</code>" in alice_client.get(URL).content.decode()


def test_an_editor_cannot_add_or_sync(client, bob, alice, other_workspace, root):
    Membership.objects.create(user=alice, workspace=other_workspace, role="editor")
    source = sync.do_create_source(other_workspace, str(root), acting_user=bob)
    client.force_login(alice)

    assert "Only a workspace's admin can add sources." in client.get(URL).content.decode()
    response = client.post(URL, {"workspace": other_workspace.pk, "path": str(root)})
    assert response.status_code == 400
    assert client.post(f"/sources/{source.pk}/sync/").status_code == 403
    assert client.post(f"/sources/{source.pk}/settings/", {"write_back": "on"}).status_code == 403
    source.refresh_from_db()
    assert not source.write_back


def test_it_hides_other_workspaces_sources(alice_client, bob, other_workspace, root):
    source = sync.do_create_source(other_workspace, str(root), acting_user=bob)
    assert str(root) not in alice_client.get(URL).content.decode()
    assert alice_client.get(f"/sources/{source.pk}/").status_code == 404
    assert alice_client.post(f"/sources/{source.pk}/sync/").status_code == 404


def test_the_source_page_lists_files_and_the_session_page_says_where_from(
    alice_client, alice, workspace, root
):
    source = sync.do_create_source(workspace, str(root), acting_user=alice)
    (root / "<b>s<b>.jsonl").write_bytes(START)
    (root / "w.jsonl").write_bytes(START + b'{"type":"user","mess')
    sync.do_sync_source(source.pk)

    page = alice_client.get(f"/sources/{source.pk}/").content.decode()
    assert "&lt;b&gt;s&lt;b&gt;.jsonl" in page and "<b>s<b>" not in page
    assert "a line is still being written" in page
    assert "2 present, 2 sessions, 0 errors" in page

    session = Session.objects.get(name="w.jsonl")
    detail = alice_client.get(session.get_absolute_url()).content.decode()
    assert f'Synced from <a href="/sources/{source.pk}/">projects</a>' in detail
    assert '<span class="badge live">live</span>' in detail
    assert "pending_result" in detail


def test_an_owner_turns_write_back_on(alice_client, alice, workspace, root):
    source = sync.do_create_source(workspace, str(root), acting_user=alice)
    alice_client.post(f"/sources/{source.pk}/settings/", {"enabled": "on", "write_back": "on"})
    source.refresh_from_db()
    assert (source.enabled, source.write_back) == (True, True)


def test_the_list_filters_by_source_and_live(alice_client, alice, workspace, root, ingest):
    source = sync.do_create_source(workspace, str(root), acting_user=alice)
    (root / "synced.jsonl").write_bytes(START)
    sync.do_sync_source(source.pk)
    ingest(workspace, "uploaded.jsonl", START)

    by_source = alice_client.get("/", {"source": source.pk}).content.decode()
    assert "synced.jsonl" in by_source and "uploaded.jsonl" not in by_source
    live = alice_client.get("/", {"live": "yes"}).content.decode()
    assert "synced.jsonl" in live and "uploaded.jsonl" not in live
    not_live = alice_client.get("/", {"live": "no"}).content.decode()
    assert "synced.jsonl" not in not_live and "uploaded.jsonl" in not_live


def test_a_site_admin_grants_a_folder_on_the_workspaces_admin_page(
    client, django_user_model, workspace, tmp_path, settings
):
    settings.SYNC_ROOTS = [tmp_path.resolve()]
    (tmp_path / "alpha").mkdir()
    admin = django_user_model.objects.create_superuser("site", password="site-password")
    client.force_login(admin)
    url = f"/admin/transcripts/workspace/{workspace.pk}/change/"
    form = {
        "name": workspace.name,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "sync_grants-TOTAL_FORMS": "1",
        "sync_grants-INITIAL_FORMS": "0",
    }

    refused = client.post(url, {**form, "sync_grants-0-path": "/etc"})
    assert refused.status_code == 200
    assert "not under an allowed sync root" in refused.content.decode()

    granted = client.post(url, {**form, "sync_grants-0-path": str(tmp_path / "alpha" / ".")})
    assert granted.status_code == 302
    grant = workspace.sync_grants.get()
    assert (grant.path, grant.granted_by) == (str((tmp_path / "alpha").resolve()), admin)
