"""Structured logs: every request is one `request_finished` event, rendered as a JSON line."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from project.logredact import redact


def _formatter(name: str) -> logging.Formatter:
    config = settings.LOGGING["formatters"][name]
    return config["()"](
        processor=config["processor"], foreign_pre_chain=config["foreign_pre_chain"]
    )


def _events(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if isinstance(r.msg, dict) and r.msg["event"] == event]


@pytest.mark.django_db
def test_a_request_logs_one_json_line_with_its_id_user_and_status(alice_client, alice, caplog):
    caplog.set_level(logging.INFO)
    alice_client.get(reverse("transcripts:session_list"))
    (record,) = _events(caplog, "request_finished")
    line = json.loads(_formatter("json").format(record))
    assert line["event"] == "request_finished"
    assert line["request"] == "GET /"
    assert line["code"] == 200
    assert line["user_id"] == alice.pk
    assert line["level"] == "info"
    assert line["logger"] == "django_structlog.middlewares.request"
    assert len(line["request_id"]) == 36
    assert line["timestamp"].endswith("Z")


@pytest.mark.django_db
def test_a_refused_upload_is_logged_with_its_reasons(alice_client, workspace, caplog, settings):
    settings.UPLOAD_MAX_FILES = 1
    caplog.set_level(logging.INFO)
    files = [SimpleUploadedFile(f"{n}.jsonl", b"{}\n") for n in range(2)]
    alice_client.post(reverse("transcripts:upload"), {"workspace": workspace.pk, "files": files})
    (record,) = _events(caplog, "upload_refused")
    line = json.loads(_formatter("json").format(record))
    messages = [error["message"] for error in line["errors"]["files"]]
    assert messages[0] == "This upload holds more than 1 files; one upload may hold at most 1."
    assert line["request_id"] == _events(caplog, "request_finished")[0].msg["request_id"]


def test_a_plain_logging_call_becomes_a_json_line_too():
    record = logging.LogRecord(
        "django.request", logging.WARNING, __file__, 1, "Bad %s", ("x",), None
    )
    line = json.loads(_formatter("json").format(record))
    assert (line["event"], line["level"], line["logger"]) == ("Bad x", "warning", "django.request")


@pytest.mark.django_db
def test_no_log_line_holds_an_invitation_secret(alice_client, client, workspace, caplog):
    caplog.set_level(logging.INFO)
    response = alice_client.post(f"/workspaces/{workspace.pk}/invitations/", {"role": "admin"})
    secret = re.findall(r"/accounts/invitations/([^/<]+)/", response.content.decode())[0]
    client.get(f"/accounts/invitations/{secret}/")  # logged out: sent to the login page
    client.get(f"/accounts/login/?next=/accounts/invitations/{secret}/")
    client.get(f"/accounts/login/?next=%2Faccounts%2Finvitations%2F{secret}%2F")
    client.get("/accounts/invitations/not-a-secret-we-made/")  # a 404 Django logs itself
    lines = [
        _formatter(name).format(record) for record in caplog.records for name in ("json", "console")
    ]
    assert lines and not [line for line in lines if secret in line or "not-a-secret" in line]
    finished = [r.msg["request"] for r in _events(caplog, "request_finished")]
    assert "GET /accounts/invitations/[redacted]/" in finished
    assert "GET /accounts/login/?next=/accounts/invitations/[redacted]/" in finished


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("GET /accounts/reset/MQ/c4x1-abc123/", "GET /accounts/reset/MQ/[redacted]/"),
        ("GET /accounts/reset/MQ/set-password/", "GET /accounts/reset/MQ/set-password/"),
        ("POST /accounts/invitations/AbC_-9/", "POST /accounts/invitations/[redacted]/"),
        ("GET /workspaces/3/invitations/", "GET /workspaces/3/invitations/"),
        (
            "GET /workspaces/3/invitations/7/revoke/",
            "GET /workspaces/3/invitations/7/revoke/",
        ),
        ("nothing here", "nothing here"),
        ("GET /accounts/INVITATIONS/AbC_-9/", "GET /accounts/INVITATIONS/[redacted]/"),
        (
            "GET /accounts/login/?next=%252Faccounts%252Finvitations%252FAbC_-9%252F",
            "GET /accounts/login/?next=%252Faccounts%252Finvitations%252F[redacted]",
        ),
        ("GET /accounts/invitations/%22AbC_-9/", "GET /accounts/invitations/[redacted]/"),
    ],
)
def test_secrets_in_paths_are_redacted(text: str, shown: str) -> None:
    assert redact(text) == shown
