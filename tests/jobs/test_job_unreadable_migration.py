"""Migration 0023: failed items whose blob could not be read are marked so (no retry offered)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.helpers import migrate

BEFORE = [("transcripts", "0022_parent_loop")]
AFTER = [("transcripts", "0023_job_waiting_item_unreadable")]


@pytest.mark.django_db(transaction=True)
def test_it_marks_the_items_that_failed_on_an_unreadable_blob():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    apps = migrate(BEFORE)
    try:
        Workspace = apps.get_model("transcripts", "Workspace")
        OldJob = apps.get_model("transcripts", "Job")
        Session = apps.get_model("transcripts", "Session")
        JobItem = apps.get_model("transcripts", "JobItem")
        Revision = apps.get_model("transcripts", "Revision")
        workspace = Workspace.objects.create(name="W")
        job = OldJob.objects.create(
            workspace=workspace, policy="synthesize", status="done", total=3, failed=3
        )
        errors = {
            "gone.jsonl": "BlobUnreadable: the blob blobs/ab/cd is missing from storage",
            "broken.jsonl": "broken.jsonl: not a transcript format Pairfix reads",
            "hiccup.jsonl": "OSError: storage unavailable",
        }
        for name, error in errors.items():
            session = Session.objects.create(workspace=workspace, name=name, format="x")
            base = Revision.objects.create(
                session=session, number=0, sha256="0" * 64, size=0, engine_version="1"
            )
            JobItem.objects.create(
                job=job, session=session, base=base, status="failed", error=error
            )

        JobItem = migrate(AFTER).get_model("transcripts", "JobItem")

        marked = dict(JobItem.objects.values_list("session__name", "unreadable"))
        assert marked == {"gone.jsonl": True, "broken.jsonl": False, "hiccup.jsonl": False}
    finally:
        migrate(latest)
