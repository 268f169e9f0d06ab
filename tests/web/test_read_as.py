"""Overriding the sniffed format: at upload, and on the session page."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from transcripts.models import Session

# Chat Completions messages that sniff as Chat Completions but could be read otherwise.
PLAIN = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])


@pytest.mark.django_db
def test_an_upload_can_name_its_format(client, alice, workspace):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(alice)
    upload = SimpleUploadedFile("chat.json", PLAIN.encode())
    response = client.post(
        reverse("transcripts:upload"),
        {"workspace": workspace.pk, "files": [upload], "format": "anthropic"},
    )
    assert response.status_code == 302
    assert Session.objects.get(name="chat.json").format == "anthropic"


@pytest.mark.django_db
def test_the_session_page_reads_a_file_as_another_format(client, alice, workspace, ingest):
    session = ingest(workspace, "chat.json", PLAIN.encode())
    client.force_login(alice)
    assert session.format == "openai_chat"
    page = client.get(session.get_absolute_url(), {"format": "anthropic"})
    assert page.status_code == 200
    assert "Anthropic Messages" in page.content.decode()
    bad = client.get(session.get_absolute_url(), {"format": "no-such-format"})
    assert bad.status_code == 400
