"""Migration 0002: items that lost the fence leave `failed` for their own counter."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.helpers import migrate

BEFORE = [("transcripts", "0001_initial")]
AFTER = [("transcripts", "0002_job_fence_lost")]


@pytest.mark.django_db(transaction=True)
def test_it_moves_fence_lost_items_out_of_the_failed_count():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    apps = migrate(BEFORE)
    try:
        Workspace = apps.get_model("transcripts", "Workspace")
        OldJob = apps.get_model("transcripts", "Job")
        Session = apps.get_model("transcripts", "Session")
        JobItem = apps.get_model("transcripts", "JobItem")
        Revision = apps.get_model("transcripts", "Revision")
        workspace = Workspace.objects.create(name="W")
        statuses = ["repaired", "failed", "fence_lost", "fence_lost"]
        job = OldJob.objects.create(
            workspace=workspace, policy="synthesize", status="done", total=4, done=1, failed=3
        )
        clean = OldJob.objects.create(
            workspace=workspace, policy="synthesize", status="done", total=1, done=0, failed=1
        )
        for n, status in enumerate(statuses):
            session = Session.objects.create(workspace=workspace, name=f"{n}.jsonl", format="x")
            # As every ingest leaves it: revision 0 is the head (later migrations fence on it).
            session.head = Revision.objects.create(
                session=session, number=0, sha256="0" * 64, size=0, engine_version="1"
            )
            session.save()
            JobItem.objects.create(job=job, session=session, status=status)
        JobItem.objects.create(job=clean, session=session, status="failed")

        Job = migrate(AFTER).get_model("transcripts", "Job")

        job, clean = Job.objects.get(pk=job.pk), Job.objects.get(pk=clean.pk)
        assert (job.done, job.failed, job.fence_lost) == (1, 1, 2)
        assert (clean.done, clean.failed, clean.fence_lost) == (0, 1, 0)
    finally:
        migrate(latest)
