"""Migrations 0004-0006: job items get their fence, audit records their policy."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.helpers import migrate
from transcripts.models import AuditRecord, JobItem

BEFORE = [("transcripts", "0003_audit_target_and_ops")]


@pytest.mark.django_db(transaction=True)
def test_it_fences_old_items_on_the_revision_they_started_from():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    apps = migrate(BEFORE)
    try:
        Workspace = apps.get_model("transcripts", "Workspace")
        Session = apps.get_model("transcripts", "Session")
        Revision = apps.get_model("transcripts", "Revision")
        Job = apps.get_model("transcripts", "Job")
        OldItem = apps.get_model("transcripts", "JobItem")
        OldAudit = apps.get_model("transcripts", "AuditRecord")
        workspace = Workspace.objects.create(name="W")
        repaired, queued = (
            Session.objects.create(workspace=workspace, name=name, format="claude_code")
            for name in ("repaired.jsonl", "queued.jsonl")
        )
        raw = Revision.objects.create(
            session=repaired, number=0, sha256="a" * 64, size=1, engine_version="1"
        )
        fixed = Revision.objects.create(
            session=repaired, number=1, sha256="b" * 64, size=1, engine_version="1", parent=raw
        )
        repaired.head = fixed
        repaired.save()
        queued.head = Revision.objects.create(
            session=queued, number=0, sha256="c" * 64, size=1, engine_version="1"
        )
        queued.save()
        job = Job.objects.create(workspace=workspace, policy="discard", status="done")
        done = OldItem.objects.create(job=job, session=repaired, status="repaired", revision=fixed)
        waiting = OldItem.objects.create(job=job, session=queued)
        op = OldAudit.objects.create(
            job=job, session=repaired, revision_from=raw, revision_to=fixed, op="drop_call"
        )
        ingest = OldAudit.objects.create(session=queued, revision_to=queued.head, op="ingest")

        migrate(latest)

        assert JobItem.objects.get(pk=done.pk).base_id == raw.pk
        assert JobItem.objects.get(pk=waiting.pk).base_id == queued.head_id
        assert AuditRecord.objects.get(pk=op.pk).policy == "discard"
        assert AuditRecord.objects.get(pk=ingest.pk).policy == ""
    finally:
        migrate(latest)
