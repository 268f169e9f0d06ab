"""Export jobs: a zip archive of repaired files with a manifest, built by a job."""

import hashlib
import io
import json
import zipfile

import pytest
from django.core.files.storage import Storage, default_storage
from django.urls import reverse

from tests.helpers import run_inline, sample, wait_for_job
from transcripts import actions
from transcripts.engine import ENGINE_VERSION, analyze
from transcripts.models import Job, Revision, Session, blob_name

FAULTY = ["formats/claude_code.jsonl", "formats/openclaw.jsonl", "formats/openai_chat.json"]
HEALTHY = "cases/02_cc-parallel-results-split-lines.jsonl"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def open_archive(job):
    with default_storage.open(job.archive, "rb") as f:
        return zipfile.ZipFile(io.BytesIO(f.read()))


@pytest.fixture
def sessions(workspace, ingest):
    found = {name: ingest(workspace, name.split("/")[1], sample(name)) for name in FAULTY}
    found[HEALTHY] = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    return found


@pytest.mark.django_db
def test_it_builds_a_zip_of_repaired_files_with_a_manifest(alice, workspace, ingest, sessions):
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    revisions = Revision.objects.count()

    job = actions.do_start_job(
        workspace,
        [*sessions.values(), broken],
        kind=Job.Kind.EXPORT,
        policy="discard",
        acting_user=alice,
    )
    job = run_inline(job)

    assert (job.status, job.done, job.failed) == ("done", 4, 1)
    assert Revision.objects.count() == revisions  # an export writes no revision
    archive = open_archive(job)
    manifest = json.loads(archive.read("manifest.json"))
    assert (manifest["job"], manifest["policy"], manifest["engine_version"]) == (
        job.pk,
        "discard",
        ENGINE_VERSION,
    )
    entries = {entry["name"]: entry for entry in manifest["sessions"]}
    assert len(entries) == 5
    for name, session in sessions.items():
        raw = sample(name)
        expected = analyze(raw, session.name, "discard")
        entry = entries[session.name]
        path = f"sessions/{session.pk}/{session.name}"
        assert archive.read(path) == expected.repaired
        assert entry == {
            "session": session.pk,
            "name": session.name,
            "format": session.format,
            "revision": 0,
            "sha256_before": sha256(raw),
            "sha256_after": sha256(expected.repaired),
            "ops_applied": [
                {
                    "op": str(op.kind),
                    "fault_kind": str(op.fault.kind),
                    "tool_call_id": op.tool_call_id,
                    "record": op.place,
                    "policy_row": op.policy_row,
                }
                for op in expected.plan.ops
            ],
            "path": path,
            "error": None,
        }
    assert entries["healthy.jsonl"]["ops_applied"] == []
    assert entries["healthy.jsonl"]["sha256_after"] == entries["healthy.jsonl"]["sha256_before"]
    assert entries["broken.jsonl"]["path"] is None
    assert entries["broken.jsonl"]["error"].startswith("broken.jsonl")
    assert sorted(archive.namelist()) == sorted(
        ["manifest.json", *(e["path"] for e in entries.values() if e["path"])]
    )


@pytest.mark.django_db
def test_a_session_name_is_one_safe_path_in_the_archive(alice, workspace):
    session = actions.do_ingest_session(
        workspace, "../../etc/x.jsonl", sample("formats/claude_code.jsonl"), acting_user=alice
    )
    job = run_inline(
        actions.do_start_job(
            workspace, [session], kind=Job.Kind.EXPORT, policy="synthesize", acting_user=alice
        )
    )
    assert open_archive(job).namelist() == [
        f"sessions/{session.pk}/_.._etc_x.jsonl",
        "manifest.json",
    ]


@pytest.mark.django_db
def test_retrying_failed_items_rebuilds_the_archive(alice, workspace, sessions, monkeypatch):
    real = Storage.open
    flaky = sessions[FAULTY[0]]
    flaky_blob = blob_name(flaky.head.sha256)

    def open_(storage, name, mode="rb"):
        if name == flaky_blob:
            raise OSError("storage unavailable")
        return real(storage, name, mode)

    monkeypatch.setattr(Storage, "open", open_)
    job = actions.do_start_job(
        workspace, list(sessions.values()), kind="export", policy="synthesize", acting_user=alice
    )
    job = run_inline(job)
    first = job.archive
    manifest = json.loads(open_archive(job).read("manifest.json"))
    [failed] = [e for e in manifest["sessions"] if e["error"]]
    assert (failed["session"], failed["error"]) == (flaky.pk, "OSError: storage unavailable")

    monkeypatch.setattr(Storage, "open", real)
    actions.do_retry_failed_items(job, acting_user=alice)
    job = run_inline(job)

    assert job.archive != first
    assert not default_storage.exists(first)
    manifest = json.loads(open_archive(job).read("manifest.json"))
    assert [e["error"] for e in manifest["sessions"]] == [None] * 4


@pytest.mark.django_db
def test_the_job_page_offers_the_archive_for_download(alice_client, alice, workspace, sessions):
    job = run_inline(
        actions.do_start_job(
            workspace,
            list(sessions.values()),
            kind="export",
            policy="synthesize",
            acting_user=alice,
        )
    )
    url = reverse("transcripts:download_archive", args=[job.pk])
    assert f'href="{url}"' in alice_client.get(job.get_absolute_url()).content.decode()

    response = alice_client.get(url)

    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == (
        f'attachment; filename="pairfix-export-{job.pk}.zip"'
    )
    body = b"".join(response.streaming_content)
    with default_storage.open(job.archive, "rb") as f:
        assert body == f.read()


@pytest.mark.django_db
def test_the_archive_is_not_for_other_workspaces(client, bob, alice, workspace, sessions):
    job = run_inline(
        actions.do_start_job(
            workspace,
            list(sessions.values()),
            kind="export",
            policy="synthesize",
            acting_user=alice,
        )
    )
    client.force_login(bob)
    assert client.get(reverse("transcripts:download_archive", args=[job.pk])).status_code == 404


@pytest.mark.django_db
def test_a_job_without_an_archive_has_none_to_download(alice_client, alice, workspace, sessions):
    job = run_inline(
        actions.do_start_job(
            workspace, list(sessions.values()), policy="synthesize", acting_user=alice
        )
    )
    url = reverse("transcripts:download_archive", args=[job.pk])
    assert alice_client.get(url).status_code == 404


@pytest.mark.usefixtures("celery_worker")
def test_a_worker_builds_the_archive(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(
        workspace, Session.objects.all(), kind="export", policy="synthesize", acting_user=alice
    )
    job = wait_for_job(job)
    repaired = analyze(sample("formats/claude_code.jsonl"), session.name, "synthesize").repaired
    assert open_archive(job).read(f"sessions/{session.pk}/claude_code.jsonl") == repaired
