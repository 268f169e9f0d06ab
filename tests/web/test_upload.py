import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.helpers import sample
from transcripts.models import AuditRecord, Session

URL = reverse("transcripts:upload")
pytestmark = pytest.mark.django_db


def upload(client, workspace, *files):
    return client.post(URL, {"workspace": workspace.pk, "files": list(files)})


def test_it_rejects_get(alice_client):
    assert alice_client.get(URL).status_code == 405


def test_it_requires_login(client, workspace):
    response = upload(client, workspace, SimpleUploadedFile("a.jsonl", b"{}\n"))
    assert response.status_code == 302
    assert Session.objects.count() == 0


def test_it_stores_the_exact_bytes_as_revision_0(alice_client, alice, workspace):
    data = sample("formats/claude_code.jsonl")
    response = upload(alice_client, workspace, SimpleUploadedFile("claude_code.jsonl", data))
    session = Session.objects.get()
    assert response.status_code == 302
    assert response.url == session.get_absolute_url()
    assert session.workspace == workspace
    assert session.name == "claude_code.jsonl"
    assert session.format == "claude_code"
    assert session.record_count == 11
    assert session.fault_counts == {"missing_result": 1}
    assert session.head.number == 0
    assert session.head.read() == data
    assert session.created_by == alice
    audit = AuditRecord.objects.get()
    assert (audit.op, audit.acting_user, audit.revision_to) == ("ingest", alice, session.head)


def test_it_uploads_several_files(alice_client, workspace):
    response = upload(
        alice_client,
        workspace,
        SimpleUploadedFile("claude_code.jsonl", sample("formats/claude_code.jsonl")),
        SimpleUploadedFile("openai_chat.json", sample("formats/openai_chat.json")),
    )
    assert response.status_code == 302
    assert response.url == reverse("transcripts:session_list")
    assert sorted(Session.objects.values_list("name", "format")) == [
        ("claude_code.jsonl", "claude_code"),
        ("openai_chat.json", "openai_chat"),
    ]


def test_it_keeps_an_unreadable_file_and_shows_why(alice_client, workspace):
    data = b'{"type":"user"\n\xff\xfe not even utf-8'
    response = upload(alice_client, workspace, SimpleUploadedFile("broken.jsonl", data))
    session = Session.objects.get()
    assert response.status_code == 302
    assert session.error.startswith("broken.jsonl")
    assert session.head.read() == data

    page = alice_client.get(session.get_absolute_url())
    assert page.status_code == 200
    assert "This file could not be read" in page.content.decode()
    assert session.error in page.content.decode()

    raw = alice_client.get(reverse("transcripts:download_revision", args=[session.pk, 0]))
    assert raw.status_code == 200
    assert raw.content == data


def test_it_refuses_a_workspace_the_user_is_not_in(alice_client, other_workspace):
    response = upload(
        alice_client,
        other_workspace,
        SimpleUploadedFile("a.jsonl", sample("formats/claude_code.jsonl")),
    )
    assert response.status_code == 400
    assert Session.objects.count() == 0


def test_it_requires_a_file(alice_client, workspace):
    response = alice_client.post(URL, {"workspace": workspace.pk})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()


def test_it_stores_an_empty_file_as_an_unreadable_session(alice_client, workspace):
    response = upload(alice_client, workspace, SimpleUploadedFile("empty.jsonl", b""))
    session = Session.objects.get()
    assert response.status_code == 302
    assert response.url == session.get_absolute_url()
    assert session.error.startswith("empty.jsonl: ")
    assert "the file is empty" in session.error
    assert (session.head.number, session.head.size, session.head.read()) == (0, 0, b"")

    page = alice_client.get(session.get_absolute_url()).content.decode()
    assert "This file could not be read" in page
    assert session.error in page
