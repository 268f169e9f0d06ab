"""Structured logs: every request is one `request_finished` event, rendered as a JSON line."""

from __future__ import annotations

import json
import logging

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse


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
