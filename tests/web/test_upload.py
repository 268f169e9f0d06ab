import gzip
import hashlib
import io
import uuid
import zipfile
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DatabaseError
from django.db.models.signals import pre_save
from django.urls import reverse

from tests.helpers import sample
from transcripts import actions
from transcripts.models import AuditRecord, Revision, Session, blob_name
from transcripts.uploads import Limits, LimitUploadHandler, clean_name

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


def test_an_upload_of_several_files_names_those_it_could_not_read(alice_client, workspace):
    response = upload(
        alice_client,
        workspace,
        SimpleUploadedFile("claude_code.jsonl", sample("formats/claude_code.jsonl")),
        SimpleUploadedFile("notes.json", b'{"theme": "dark"}'),
        SimpleUploadedFile("cut.jsonl", b"not json\n"),
    )
    page = alice_client.get(response.url).content.decode()
    assert "Uploaded 3 sessions." in page
    assert "2 of them could not be read (stored as they are): notes.json: " in page
    assert "; cut.jsonl: line 1: " in page


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


def test_a_second_upload_of_the_same_bytes_names_the_first(
    alice_client, workspace, other_workspace
):
    data = sample("formats/claude_code.jsonl")
    upload(alice_client, workspace, SimpleUploadedFile("s.jsonl", data))
    first = Session.objects.get()
    response = upload(alice_client, workspace, SimpleUploadedFile("again.jsonl", data))
    second = Session.objects.exclude(pk=first.pk).get()
    page = alice_client.get(response.url).content.decode()
    assert (
        f"“again.jsonl” has the same bytes as revision 0 of session {first.pk} (“s.jsonl”); "
        f"it is stored again as session {second.pk}."
    ) in page
    # Two copies in one upload are named too.
    response = upload(
        alice_client,
        workspace,
        SimpleUploadedFile("twin-a.jsonl", b'{"a": 1}\n'),
        SimpleUploadedFile("twin-b.jsonl", b'{"a": 1}\n'),
    )
    a, b = Session.objects.get(name="twin-a.jsonl"), Session.objects.get(name="twin-b.jsonl")
    page = alice_client.get(response.url).content.decode()
    assert (
        f"“twin-b.jsonl” (session {b.pk}) has the same bytes as “twin-a.jsonl” (session {a.pk}) "
        "of this upload."
    ) in page
    # A copy in another workspace is no business of this one.
    Session.objects.filter(pk__in=[first.pk, second.pk]).update(workspace=other_workspace)
    response = upload(alice_client, workspace, SimpleUploadedFile("third.jsonl", data))
    assert "has the same bytes" not in alice_client.get(response.url).content.decode()


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
    assert b"".join(raw.streaming_content) == data


def test_it_refuses_a_workspace_the_user_is_not_in(alice_client, other_workspace):
    response = upload(
        alice_client,
        other_workspace,
        SimpleUploadedFile("a.jsonl", sample("formats/claude_code.jsonl")),
    )
    assert response.status_code == 400
    assert Session.objects.count() == 0


@pytest.mark.parametrize("field", ["workspace", "format"])
def test_it_refuses_a_workspace_or_format_given_twice(alice_client, alice, workspace, field):
    # A browser sends each once; a hand-made request sending two kept the last one.
    second = actions.do_create_workspace("Second", acting_user=alice)
    body = {
        "workspace": [workspace.pk, second.pk] if field == "workspace" else workspace.pk,
        "format": ["codex", "claude_code"] if field == "format" else "",
        "files": [SimpleUploadedFile("a.jsonl", b"{}\n"), SimpleUploadedFile("b.jsonl", b"{}\n")],
    }
    response = alice_client.post(URL, body)
    assert response.status_code == 400
    assert response.context["upload_form"].errors == {field: ["Given 2 times: choose one."]}
    assert Session.objects.count() == 0


def test_it_takes_several_files_in_one_upload_by_design(alice_client, workspace):
    files = [SimpleUploadedFile("a.jsonl", b"{}\n"), SimpleUploadedFile("b.jsonl", b"{}\n")]
    assert upload(alice_client, workspace, *files).status_code == 302
    assert sorted(Session.objects.values_list("name", flat=True)) == ["a.jsonl", "b.jsonl"]


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


# Archives, limits, names and failures.


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _refusal(response) -> str:
    assert response.status_code == 400
    assert Session.objects.count() == 0
    html = response.content.decode()
    assert "Nothing was stored." in html
    return html


def test_it_unpacks_a_gz_into_the_session_it_holds(alice_client, workspace):
    data = sample("formats/claude_code.jsonl")
    response = upload(alice_client, workspace, SimpleUploadedFile("cc.jsonl.gz", _gz(data)))
    session = Session.objects.get()
    assert response.url == session.get_absolute_url()
    assert (session.name, session.format) == ("cc.jsonl", "claude_code")
    assert session.head.read() == data


def test_it_stores_each_file_of_a_zip(alice_client, workspace):
    archive = _zip(
        {
            "exports/claude_code.jsonl": sample("formats/claude_code.jsonl"),
            "openai_chat.json": sample("formats/openai_chat.json"),
            "exports/": b"",
            "__MACOSX/exports/._claude_code.jsonl": b"\x00\x05\x16\x07",
        }
    )
    response = upload(alice_client, workspace, SimpleUploadedFile("sessions.zip", archive))
    assert response.status_code == 302
    assert sorted(Session.objects.values_list("name", "format")) == [
        ("claude_code.jsonl", "claude_code"),
        ("openai_chat.json", "openai_chat"),
    ]
    stored = Session.objects.get(name="openai_chat.json").head.read()
    assert stored == sample("formats/openai_chat.json")


def test_a_claude_code_subagent_uploaded_with_its_session_is_linked_to_it(
    alice_client, alice, workspace
):
    from tests.sync.conftest import call, reply, result, user

    # Each line of a subagent's file names its parent's session id, the parent's file name.
    lines = user("u1", None, "go") + call("a1", "u1", "toolu_1") + result("u2", "a1", "toolu_1")
    session_file, subagent = (
        lines + reply("a2", "u2"),
        lines.replace(b'"uuid"', b'"isSidechain":true,"uuid"'),
    )
    archive = _zip({"p/s-1.jsonl": session_file, "p/s-1/subagents/agent-a1.jsonl": subagent})
    upload(alice_client, workspace, SimpleUploadedFile("claude.zip", archive))
    parent = Session.objects.get(name="s-1.jsonl")
    assert Session.objects.get(name="agent-a1.jsonl").parent == parent
    page = alice_client.get(parent.get_absolute_url()).content.decode()
    assert "Subagents: <a href=" in page and ">agent-a1.jsonl</a>" in page
    # A subagent uploaded later finds the session uploaded before; one naming no session
    # of the workspace stays on its own.
    upload(alice_client, workspace, SimpleUploadedFile("agent-b2.jsonl", subagent))
    assert Session.objects.get(name="agent-b2.jsonl").parent == parent
    stray = subagent.replace(b'"s-1"', b'"s-9"')
    upload(alice_client, workspace, SimpleUploadedFile("agent-c3.jsonl", stray))
    assert Session.objects.get(name="agent-c3.jsonl").parent is None
    assert parent.parent is None
    # A subagent naming another subagent, or a session of another format, stays alone.
    named = subagent.replace(b'"s-1"', b'"agent-b2"')
    upload(alice_client, workspace, SimpleUploadedFile("agent-d4.jsonl", named))
    assert Session.objects.get(name="agent-d4.jsonl").parent is None
    codex = sample("formats/codex_rollout.jsonl")
    upload(alice_client, workspace, SimpleUploadedFile("s-7.jsonl", codex))
    sevens = subagent.replace(b'"s-1"', b'"s-7"')
    upload(alice_client, workspace, SimpleUploadedFile("agent-e5.jsonl", sevens))
    assert Session.objects.get(name="agent-e5.jsonl").parent is None
    # Its parent deleted, a subagent's page no longer links to it.
    actions.do_delete_sessions([parent], acting_user=alice)
    child = Session.objects.get(name="agent-b2.jsonl")
    assert "A subagent of" not in alice_client.get(child.get_absolute_url()).content.decode()


def test_it_refuses_a_file_over_the_size_limit(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1000
    response = upload(alice_client, workspace, SimpleUploadedFile("big.jsonl", b"x" * 5000))
    html = _refusal(response)
    assert "“big.jsonl” is more than 1000 bytes; each session may be at most 1000 bytes." in html


def test_the_handler_drops_files_past_the_limits_while_reading(rf):
    limits = Limits(file_size=1000, total_size=4000, files=3)
    request = rf.post(
        URL,
        {
            "files": [
                SimpleUploadedFile("small.jsonl", b"s" * 900),
                SimpleUploadedFile("big.jsonl", b"b" * 1001),
                SimpleUploadedFile("sessions.zip", b"z" * 1500),
                SimpleUploadedFile("more.jsonl", b"m" * 10),
            ]
        },
    )
    handler = LimitUploadHandler(request, limits)
    request.upload_handlers.insert(0, handler)
    assert [f.name for f in request.FILES.getlist("files")] == ["small.jsonl", "sessions.zip"]
    request.close()  # deletes the staged files
    assert handler.refused == [
        "“big.jsonl” is more than 1000 bytes; each session may be at most 1000 bytes.",
        "This upload holds more than 3 files; one upload may hold at most 3.",
    ]


def test_the_handler_stops_reading_past_the_total(rf):
    limits = Limits(file_size=1000, total_size=1500, files=10)
    files = [SimpleUploadedFile(f"{n}.jsonl", b"x" * 900) for n in range(3)]
    request = rf.post(URL, {"files": files})
    handler = LimitUploadHandler(request, limits)
    request.upload_handlers.insert(0, handler)
    assert [f.name for f in request.FILES.getlist("files")] == ["0.jsonl"]
    request.close()
    assert handler.refused == [
        "This upload is more than 1.5 KiB; one upload may hold at most 1.5 KiB."
    ]


def test_it_refuses_a_gz_that_decompresses_past_the_limit(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1024 * 1024
    bomb = _gz(b"\0" * (20 * 1024 * 1024))
    assert len(bomb) < 30_000
    response = upload(alice_client, workspace, SimpleUploadedFile("bomb.jsonl.gz", bomb))
    html = _refusal(response)
    assert "“bomb.jsonl.gz” decompresses to more than 1.0 MiB; each session may be at most" in html


def test_it_refuses_a_zip_member_past_the_limit(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1024 * 1024
    bomb = _zip({"ok.jsonl": sample("formats/claude_code.jsonl"), "big.jsonl": b"\0" * 2**22})
    response = upload(alice_client, workspace, SimpleUploadedFile("bomb.zip", bomb))
    html = _refusal(response)
    assert "“big.jsonl” in “bomb.zip” decompresses to more than 1.0 MiB" in html


def test_it_refuses_a_zip_that_understates_a_members_size(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1024 * 1024
    archive = bytearray(_zip({"big.jsonl": b"\0" * 2**22}))
    # Claim 100 bytes in the central directory: reading stops there and the CRC fails.
    central = archive.index(b"PK\x01\x02")
    archive[central + 24 : central + 28] = (100).to_bytes(4, "little")
    response = upload(alice_client, workspace, SimpleUploadedFile("liar.zip", bytes(archive)))
    html = _refusal(response)
    assert "“liar.zip” is not a valid zip archive" in html


def test_it_refuses_too_many_files(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILES = 2
    files = [SimpleUploadedFile(f"{n}.jsonl", b"{}\n") for n in range(3)]
    html = _refusal(upload(alice_client, workspace, *files))
    assert "This upload holds more than 2 files; one upload may hold at most 2." in html


def test_it_counts_the_members_of_a_zip_as_sessions(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILES = 2
    archive = _zip({f"{n}.jsonl": b"{}\n" for n in range(3)})
    html = _refusal(upload(alice_client, workspace, SimpleUploadedFile("three.zip", archive)))
    assert "This upload holds more than 2 sessions; one upload may hold at most 2." in html


def test_it_refuses_an_upload_over_the_total_limit(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 3000
    settings.UPLOAD_MAX_TOTAL_SIZE = 5000
    files = [SimpleUploadedFile(f"{n}.jsonl", b"x" * 2000) for n in range(3)]
    html = _refusal(upload(alice_client, workspace, *files))
    assert "This upload is more than 4.9 KiB; one upload may hold at most 4.9 KiB." in html


def test_it_refuses_sessions_that_decompress_past_the_total(alice_client, workspace, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 3000
    settings.UPLOAD_MAX_TOTAL_SIZE = 5000
    archive = _zip({f"{n}.jsonl": b"x" * 2000 for n in range(3)})
    html = _refusal(upload(alice_client, workspace, SimpleUploadedFile("s.zip", archive)))
    assert "This upload holds more than 4.9 KiB of sessions (after decompression)" in html


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("broken.jsonl.gz", b"not gzip at all", "“broken.jsonl.gz” is not a valid gzip file"),
        ("cut.jsonl.gz", _gz(b'{"a": 1}\n' * 1000)[:-20], "“cut.jsonl.gz” is not a valid gzip"),
        ("broken.zip", b"PK\x03\x04 not really", "“broken.zip” is not a valid zip archive"),
        ("empty.zip", _zip({}), "“empty.zip” holds no files."),
        ("sessions.tar.gz", _gz(b"tar"), "“sessions.tar.gz” is a tar archive: upload a .zip"),
    ],
)
def test_it_refuses_an_archive_it_cannot_read(alice_client, workspace, name, data, message):
    html = _refusal(upload(alice_client, workspace, SimpleUploadedFile(name, data)))
    assert message in html


def test_it_refuses_an_encrypted_zip(alice_client, workspace):
    archive = bytearray(_zip({"secret.jsonl": b"{}\n"}))
    # Set the "encrypted" flag bit in the local and the central header.
    archive[6] |= 1
    central = archive.index(b"PK\x01\x02")
    archive[central + 8] |= 1
    response = upload(alice_client, workspace, SimpleUploadedFile("locked.zip", bytes(archive)))
    html = _refusal(response)
    assert "“secret.jsonl” in “locked.zip” is encrypted" in html


def test_it_keeps_only_a_safe_name(alice_client, workspace):
    archive = _zip({"../../etc/\u202eevil\u200b\x07.jsonl": sample("formats/openclaw.jsonl")})
    upload(alice_client, workspace, SimpleUploadedFile("a.zip", archive))
    assert Session.objects.get().name == "evil.jsonl"


@pytest.mark.parametrize(
    ("name", "clean"),
    [
        ("session.jsonl", "session.jsonl"),
        ("C:\\Users\\me\\s.jsonl", "s.jsonl"),
        ("a/b/../c.json", "c.json"),
        ("\u202egnp.exe", "gnp.exe"),
        ("  spaced name .jsonl  ", "spaced name .jsonl"),
        ("nul\x00byte.jsonl", "nulbyte.jsonl"),
        ("..", "session"),
        ("dir/", "session"),
        ("e\u0301.jsonl", "\u00e9.jsonl"),
    ],
)
def test_clean_name(name, clean):
    assert clean_name(name) == clean


def _blob_exists(data: bytes) -> bool:
    return default_storage.exists(blob_name(hashlib.sha256(data).hexdigest()))


def test_a_failed_upload_stores_nothing(alice_client, workspace):
    first = f'{{"unique": "{uuid.uuid4()}"}}\n'.encode()

    def fail_on_second(sender, instance, **kwargs):
        if instance.name == "second.jsonl":
            raise DatabaseError("disk I/O error")

    pre_save.connect(fail_on_second, sender=Session)
    try:
        response = upload(
            alice_client,
            workspace,
            SimpleUploadedFile("first.jsonl", first),
            SimpleUploadedFile("second.jsonl", sample("formats/claude_code.jsonl")),
        )
    finally:
        pre_save.disconnect(fail_on_second, sender=Session)
    assert response.status_code == 503
    assert "The upload could not be stored (DatabaseError); nothing was kept." in (
        response.content.decode()
    )
    assert (Session.objects.count(), Revision.objects.count(), AuditRecord.objects.count()) == (
        0,
        0,
        0,
    )
    assert not _blob_exists(first)


def test_a_storage_failure_removes_the_blobs_already_written(alice_client, workspace, monkeypatch):
    first = f'{{"unique": "{uuid.uuid4()}"}}\n'.encode()
    second = f'{{"unique": "{uuid.uuid4()}"}}\n'.encode()
    save = default_storage.save

    def save_until_full(name, content, *args, **kwargs):
        if content.read() == second:
            raise OSError(28, "No space left on device")
        content.seek(0)
        return save(name, content, *args, **kwargs)

    monkeypatch.setattr(default_storage, "save", save_until_full)
    response = upload(
        alice_client,
        workspace,
        SimpleUploadedFile("first.jsonl", first),
        SimpleUploadedFile("second.jsonl", second),
    )
    assert response.status_code == 503
    assert "nothing was kept" in response.content.decode()
    assert Session.objects.count() == 0
    assert not _blob_exists(first)


# Damaged archives: every failure to unpack is a refusal that says why, never a 500.

ARCHIVED = sample("formats/claude_code.jsonl")


def _non_utf8_name() -> bytes:
    archive = bytearray(_zip({"a.jsonl": ARCHIVED}))
    # Flag the name as UTF-8 (bit 11) in both headers, and make it bytes that are not.
    for signature, flags, name in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        at = archive.index(signature)
        archive[at + flags + 1] |= 0x08
        archive[at + name : at + name + 7] = b"\xff\xfe.json"
    return bytes(archive)


def _damaged_member(method: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        archive.writestr("a.jsonl", ARCHIVED)
    data = bytearray(out.getvalue())
    start = 30 + len("a.jsonl")  # the member's compressed bytes follow its local header
    for at in range(start + 8, start + 40):
        data[at] ^= 0x55
    return bytes(data)


def _bad_central_directory_offset() -> bytes:
    archive = bytearray(_zip({"a.jsonl": ARCHIVED}))
    end = archive.rindex(b"PK\x05\x06")
    archive[end + 16 : end + 20] = (0xFFFFFF00).to_bytes(4, "little")
    return bytes(archive)


@pytest.mark.parametrize(
    ("archive", "reason"),
    [
        (_non_utf8_name(), "a file name in it is not valid UTF-8."),
        (_damaged_member(zipfile.ZIP_BZIP2), "Invalid data stream."),
        (_damaged_member(zipfile.ZIP_LZMA), "Corrupt input data."),
        (_bad_central_directory_offset(), ""),
    ],
    ids=["name-not-utf-8", "bzip2", "lzma", "central-directory-offset"],
)
def test_it_refuses_a_damaged_zip_saying_why(alice_client, workspace, archive, reason):
    response = upload(alice_client, workspace, SimpleUploadedFile("damaged.zip", archive))
    html = _refusal(response)
    assert f"“damaged.zip” is not a valid zip archive: {reason}" in html


# Clear refusals: too many files, names that name nothing.


def test_it_says_the_file_limit_when_a_thousand_and_one_files_come(alice_client, workspace):
    files = [SimpleUploadedFile(f"{n}.jsonl", b"{}\n") for n in range(1001)]
    html = _refusal(upload(alice_client, workspace, *files))
    assert "This upload holds more than 100 files; one upload may hold at most 100." in html


def _upload_named(client, workspace, filename: str, data: bytes):
    """Post one file named `filename` exactly (the test client's files refuse such names)."""
    boundary = "pairfix-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="workspace"\r\n\r\n'
            f"{workspace.pk}\r\n"
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"'
            "\r\nContent-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return client.generic(
        "POST", URL, body, content_type=f"multipart/form-data; boundary={boundary}"
    )


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("..", ".."),
        ("\u200b", "[U+200B]"),
        ("\u200b\u200d.", "[U+200B][U+200D]."),
        ("a/..", "a/.."),
    ],
)
def test_it_says_what_is_wrong_with_a_name_that_names_nothing(alice_client, workspace, name, shown):
    response = _upload_named(alice_client, workspace, name, b"{}\n")
    html = _refusal(response)
    assert "This field is required." not in html
    assert f"“{shown}” is not a usable file name" in html
    assert "Rename the file and upload it again." in html


def test_an_empty_file_input_is_still_required(alice_client, workspace):
    # A form sent with no file chosen has a file part named "": not a file at all.
    response = _upload_named(alice_client, workspace, "", b"")
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()


def test_a_staged_upload_leaves_no_temporary_file(alice_client, workspace, settings):
    staging = Path(settings.FILE_UPLOAD_TEMP_DIR)
    before = set(staging.iterdir())
    archive = _zip({"a.jsonl": sample("formats/claude_code.jsonl"), "b.jsonl": b"{}\n"})
    upload(alice_client, workspace, SimpleUploadedFile("s.zip", archive))
    upload(alice_client, workspace, SimpleUploadedFile("s.jsonl.gz", _gz(b"{}\n")))
    assert Session.objects.count() == 3
    assert set(staging.iterdir()) == before


def test_a_file_name_too_long_for_the_parser_is_refused_in_words(alice_client, workspace):
    boundary = "pairfix-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="workspace"\r\n\r\n'
        f"{workspace.pk}\r\n"
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
        f'filename="{"N" * 20000}.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n{}\n\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    response = alice_client.generic(
        "POST", URL, body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    assert response.status_code == 400
    page = " ".join(response.content.decode().split())
    assert "Upload refused" in page
    assert (
        "The upload could not be read (Request max total header size exceeded). A file name "
        "of thousands of characters does this: rename the file and upload it again."
    ) in page
    assert Session.objects.count() == 0
