"""Transcript content is untrusted: it renders escaped, and cannot reorder what it shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests import hostile as hostile_session
from tests import lone_surrogate
from tests.helpers import run_inline
from transcripts import actions
from transcripts.models import AuditRecord, Session


def _chat(call_id: str, name: str, text: str) -> bytes:
    return json.dumps(
        [
            {"role": "user", "content": text},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": "{}"},
                    }
                ],
            },
        ]
    ).encode()


def test_it_escapes_markup_and_spells_out_bidi_controls(alice_client, workspace, ingest):
    data = _chat(
        "call_1\u202e", "<script>alert(3)</script>", "\u202egnp.exe <img src=x onerror=alert(1)>"
    )
    session = ingest(workspace, "hostile.json", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "<script>alert(3)" not in html
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "\u202e" not in html
    assert "[U+202E]gnp.exe" in html
    assert "call_1[U+202E]" in html


def test_it_spells_out_control_characters_in_ids(alice_client, workspace, ingest):
    # An id with an escape or a NUL would otherwise look like `call_1` on the page.
    session = ingest(workspace, "controls.json", _chat("call_1\x1b[2J\x00", "ru\x07n", "hi"))
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "\x1b" not in html and "\x07" not in html
    assert "call_1\\x1b[2J\\x00" in html
    assert "ru\\x07n" in html


def test_the_page_and_its_fragment_are_cached_apart(alice_client, workspace, ingest):
    session = ingest(workspace, "chat.json", _chat("call_1", "run", "hi"))
    response = alice_client.get(session.get_absolute_url())
    assert "HX-Request" in response["Vary"]


# A session of every hostile payload (tests/hostile.py), on every page that shows it.

HOSTILE_NAME = "<img src=x onerror=alert(1)>\u202egnp.jsonl"


@pytest.fixture
def hostile(workspace, ingest):
    return ingest(workspace, HOSTILE_NAME, hostile_session.claude_code_session())


def _assert_inert(html: str) -> None:
    found = [markup for markup in hostile_session.UNESCAPED if markup in html]
    assert found == []


def test_every_payload_renders_escaped_and_readable(alice_client, hostile):
    html = alice_client.get(hostile.get_absolute_url()).content.decode()
    _assert_inert(html)
    # Each record shown whole, as expanding it in the timeline does.
    for index in range(hostile.record_count):
        url = reverse("transcripts:record_detail", args=[hostile.pk, index])
        response = alice_client.get(url)
        assert response.status_code == 200
        _assert_inert(response.content.decode())
    for shown in [
        "&lt;script&gt;window.__pwned = 1; alert(&#x27;script&#x27;)&lt;/script&gt;",
        "&lt;svg onload=&quot;window.__pwned = 3&quot;&gt;",
        "&lt;a href=&quot;javascript:window.__pwned = 4&quot;&gt;click me&lt;/a&gt;",
        "&lt;/style&gt;&lt;style&gt;body { background: url(http://other.invalid/css) }",
        "{{ 7|add:7 }} {% debug %} ${7*7}",
        "[U+202E]gnp.exe [U+2066]isolated[U+2069] [U+200F]right-to-left",
        "toolu_13&lt;/textarea&gt;&lt;/code&gt;",
    ]:
        assert shown in html


def test_the_list_audit_and_job_pages_escape_it_too(alice_client, alice, workspace, hostile):
    job = run_inline(
        actions.do_start_job(workspace, [hostile], policy="synthesize", acting_user=alice)
    )
    assert job.done == 1
    # The dropped malformed calls' bytes, payloads included, are in the audit records.
    assert AuditRecord.objects.filter(job=job, op="drop_call").count() == 7
    pages = [
        reverse("transcripts:session_list"),
        reverse("transcripts:audit_list"),
        job.get_absolute_url(),
        hostile.get_absolute_url(),
    ]
    for url in pages:
        html = alice_client.get(url).content.decode()
        _assert_inert(html)
        assert "&lt;img src=x onerror=alert(1)&gt;gnp.jsonl" in html or url == pages[3]


def test_a_ten_megabyte_line_is_cut_short_on_the_page(alice_client, workspace, ingest, settings):
    settings.TIMELINE_INLINE_BYTES = 64 * 1024 * 1024  # built in the request, not by a task
    data = hostile_session.claude_code_session(big_line=True)
    session = ingest(workspace, "big.jsonl", data)
    assert (session.format, session.error) == ("claude_code", "")
    response = alice_client.get(session.get_absolute_url())
    assert response.status_code == 200
    html = response.content.decode()
    assert "&lt;svg onload=" in html
    # The line is summarised, never pasted whole into the page.
    assert len(response.content) < 1024 * 1024
    _assert_inert(html)
    # The record's own page shows more of it, inert even so.
    whole = alice_client.get(reverse("transcripts:record_detail", args=[session.pk, 8]))
    assert whole.status_code == 200
    assert "AAAAAAAA" in whole.content.decode()
    _assert_inert(whole.content.decode())
    raw = alice_client.get(reverse("transcripts:download_revision", args=[session.pk, 0]))
    body = b"".join(raw.streaming_content)
    assert body == data
    assert len(body) > hostile_session.BIG_LINE_BYTES


def test_deep_nesting_is_read_where_it_can_be_and_refused_readably_where_not(
    alice_client, workspace, ingest
):
    nested = ingest(
        workspace, "nested.jsonl", hostile_session.claude_code_session(nested_depth=500)
    )
    assert (nested.format, nested.error) == ("claude_code", "")
    assert alice_client.get(nested.get_absolute_url()).status_code == 200

    too_deep = ingest(workspace, "deep.json", hostile_session.deeply_nested())
    assert too_deep.error == "deep.json: line 1: not valid JSON: column 1026: depth limit exceeded"
    html = alice_client.get(too_deep.get_absolute_url()).content.decode()
    assert "This file could not be read" in html
    assert too_deep.error in html


@pytest.mark.parametrize(
    "url",
    [
        reverse("transcripts:session_list"),
        reverse("transcripts:audit_list"),
        reverse("login"),
        reverse("healthz"),
    ],
)
def test_every_response_carries_a_strict_csp(alice_client, url):
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in alice_client.get(url)["Content-Security-Policy"].split(";")
    )
    assert policy == {
        "default-src": "'none'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": "'self' data:",
        "font-src": "'self'",
        "connect-src": "'self'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
        "base-uri": "'none'",
        "object-src": "'none'",
    }


TEMPLATES = Path(settings.BASE_DIR) / "templates"


@pytest.mark.parametrize(
    "template", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES))
)
def test_no_template_needs_what_the_csp_forbids(template):
    text = template.read_text()
    # Inline scripts, event handler attributes, style attributes and <style> blocks.
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", text) == []
    assert re.findall(r"\son[a-z]+\s*=", text) == []
    assert re.findall(r"\sstyle\s*=", text) == []
    assert "<style" not in text
    assert "javascript:" not in text


# What no column takes as it is (NUL, lone surrogates, ids and names of any length)
# still stores, on PostgreSQL too (CI): ingest, timeline, jobs, pages, exports.

UNSTORABLE_NAME = f"bin{hostile_session.NUL}\udcff" + "n" * 400 + ".jsonl"


@pytest.fixture
def unstorable(workspace, ingest):
    return ingest(workspace, UNSTORABLE_NAME, hostile_session.unstorable_session())


def test_text_no_column_takes_as_it_is_still_stores_and_shows(alice_client, unstorable):
    assert (unstorable.format, unstorable.error) == ("claude_code", "")
    assert unstorable.name.startswith("binn") and len(unstorable.name) <= 255
    assert unstorable.head.read() == hostile_session.unstorable_session()
    response = alice_client.get(unstorable.get_absolute_url())
    assert response.status_code == 200
    html = response.content.decode()
    assert "toolu_xxxxxxxxxx" in html
    assert "the id &#x27;toolu_2\\x00&#x27; has characters Anthropic refuses" in html
    for index in range(unstorable.record_count):
        url = reverse("transcripts:record_detail", args=[unstorable.pk, index])
        assert alice_client.get(url).status_code == 200
    for policy in ("discard", "native", "openclaw"):
        response = alice_client.get(unstorable.get_absolute_url(), {"policy": policy})
        assert response.status_code == 200
    # The search looks in text that held NUL and finds it by its other words.
    rows = reverse("transcripts:session_rows", args=[unstorable.pk])
    found = alice_client.get(rows, {"q": "the binary"})
    assert found.status_code == 200
    assert "show me" in found.content.decode()


def test_jobs_on_it_repair_audit_and_export_every_id(alice_client, alice, workspace, unstorable):
    dry = run_inline(
        actions.do_start_job(
            workspace, [unstorable], policy="synthesize", kind="dry_run", acting_user=alice
        )
    )
    assert (dry.done, dry.failed) == (1, 0)
    assert dry.items.get().diff
    job = run_inline(
        actions.do_start_job(workspace, [unstorable], policy="synthesize", acting_user=alice)
    )
    assert (job.done, job.failed) == (1, 0)
    audit = AuditRecord.objects.filter(job=job).order_by("id")
    # Ids Anthropic refuses are renamed in the call and its result (the long one cut to
    # 64 characters); the call with a control character in its name is dropped.
    assert [a.op for a in audit] == [
        "rename_id",
        "rename_id",
        "drop_result",
        "rename_id",
        "insert_result",
        "rename_id",
        "rename_id",
        "drop_call",
    ]
    # Ids keep every character a column takes; a NUL is spelled out as JSON does.
    long_id = hostile_session.LONG_ID.replace("\0", "\\u0000")
    assert [a.tool_call_id for a in audit][2:5] == [long_id, "toolu_2\\u0000", "toolu_2\\u0000"]
    assert audit[7].tool_call_id == "toolu_4"
    assert audit[3].note == "tool call id toolu_2\\u0000 -> toolu_2_"
    # The dropped bytes are kept exactly, NUL escapes and all.
    assert b"ELF\\u0000\\u0000" in bytes(audit[2].removed_bytes)
    export = run_inline(
        actions.do_start_job(
            workspace, [unstorable], policy="synthesize", kind="export", acting_user=alice
        )
    )
    assert (export.done, export.failed) == (1, 0)
    for url in [
        reverse("transcripts:session_list"),
        reverse("transcripts:audit_list"),
        reverse("transcripts:audit_export_csv"),
        reverse("transcripts:audit_export_jsonl"),
        job.get_absolute_url(),
        dry.get_absolute_url(),
        export.get_absolute_url(),
        reverse("transcripts:download_archive", args=[export.pk]),
        unstorable.get_absolute_url(),
    ]:
        response = alice_client.get(url)
        assert response.status_code == 200, url
        if response.streaming:  # read to the end, which closes a download's file
            assert b"".join(response.streaming_content)
    unstorable.refresh_from_db()
    assert unstorable.head.number == 1


# A lone surrogate escape (a Node string cut mid-pair) is valid JSON to Claude Code: the
# session is read as it reads it, stored (PostgreSQL refuses the code point itself) and shown.


def test_a_lone_surrogate_session_uploads_stores_and_shows(alice_client, workspace):
    data = lone_surrogate.session()
    upload = SimpleUploadedFile("cut.jsonl", data)
    response = alice_client.post(
        reverse("transcripts:upload"), {"workspace": workspace.pk, "files": [upload]}
    )
    assert response.status_code in (200, 302)
    session = Session.objects.get(workspace=workspace, name="cut.jsonl")
    assert (session.format, session.error) == ("claude_code", "")
    assert session.head.read() == data
    assert session.fault_counts == {"missing_result": 1}
    page = alice_client.get(session.get_absolute_url())
    assert page.status_code == 200
    html = page.content.decode()
    assert "malformed_record" not in html
    assert "1 failed, 9 [U+D83D]" in html
    rows = alice_client.get(reverse("transcripts:session_rows", args=[session.pk]))
    assert rows.status_code == 200 and "1 failed, 9 [U+D83D]" in rows.content.decode()
    found = alice_client.get(
        reverse("transcripts:session_rows", args=[session.pk]), {"q": "1 failed"}
    )
    assert found.status_code == 200 and "1 failed, 9" in found.content.decode()
    record = alice_client.get(reverse("transcripts:record_detail", args=[session.pk, 5]))
    assert record.status_code == 200 and "[U+D83D]" in record.content.decode()
    for view in ("resume_preview", "session_compare"):
        shown = alice_client.get(reverse(f"transcripts:{view}", args=[session.pk]))
        assert shown.status_code == 200, view
    repaired = alice_client.get(reverse("transcripts:download_repaired", args=[session.pk]))
    assert repaired.status_code == 200
    body = b"".join(repaired.streaming_content) if repaired.streaming else repaired.content
    assert data.splitlines()[5] in body.splitlines()


def test_a_call_id_holding_a_lone_surrogate_repairs_audits_and_shows(
    alice_client, alice, workspace, ingest
):
    data = lone_surrogate.session().replace(
        b"toolu_01CCCCCCCCCCCCCCCCCCCCCC", b"toolu_01C\\ud83dCC"
    )
    session = ingest(workspace, "cut-id.jsonl", data)
    assert session.fault_counts == {"malformed_call": 1, "missing_result": 1}
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "toolu_01C[U+D83D]CC" in html
    job = run_inline(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )
    assert (job.done, job.failed) == (1, 0)
    audit = AuditRecord.objects.filter(job=job).order_by("id")
    assert [a.op for a in audit] == ["rename_id", "insert_result"]
    # A column takes no lone surrogate: the id is stored as JSON spells it.
    assert audit[0].tool_call_id == "toolu_01C\\ud83dCC"
    session.refresh_from_db()
    repaired = session.head.read()
    assert b'"id":"toolu_01C_CC"' in repaired and b"\\ud83d" in repaired
    for url in [
        session.get_absolute_url(),
        reverse("transcripts:audit_list"),
        reverse("transcripts:audit_export_jsonl"),
        job.get_absolute_url(),
    ]:
        assert alice_client.get(url).status_code == 200, url
