import pytest
from django.urls import reverse

from tests.helpers import sample

pytestmark = pytest.mark.django_db


def url(session, number=0):
    return reverse("transcripts:download_revision", args=[session.pk, number])


def test_it_returns_the_uploaded_bytes(alice_client, workspace, ingest):
    data = sample("formats/openclaw.jsonl")
    session = ingest(workspace, "openclaw.jsonl", data)
    response = alice_client.get(url(session))
    assert response.status_code == 200
    assert response.streaming
    assert b"".join(response.streaming_content) == data
    assert response["Content-Length"] == str(len(data))
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == 'attachment; filename="openclaw.jsonl"'


def test_it_hides_other_workspaces_sessions(alice_client, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    assert alice_client.get(url(theirs)).status_code == 404


def test_it_returns_404_for_a_missing_revision(alice_client, workspace, ingest):
    session = ingest(workspace, "a.jsonl", sample("formats/claude_code.jsonl"))
    assert alice_client.get(url(session, 1)).status_code == 404


def test_it_rejects_post(alice_client, workspace, ingest):
    session = ingest(workspace, "a.jsonl", sample("formats/claude_code.jsonl"))
    assert alice_client.post(url(session)).status_code == 405


def test_a_name_with_folders_downloads_as_one_file_name(alice_client, workspace, ingest):
    # A synced session is named by its path below the source; names come from users.
    session = ingest(workspace, "proj/..\\..\\evil.jsonl", sample("formats/claude_code.jsonl"))
    expected = 'attachment; filename="proj_.._.._evil.jsonl"'
    for path in (url(session), reverse("transcripts:download_repaired", args=[session.pk])):
        response = alice_client.get(path)
        b"".join(response.streaming_content)
        assert response["Content-Disposition"] == expected
