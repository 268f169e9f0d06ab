from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.db.models import OuterRef, Subquery


def backfill(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Give each job item its fence (the head it started from) and each op its policy.

    An item that wrote a revision started from that revision's parent; any
    other from the session's head, or its upload if it has none.
    """
    JobItem = apps.get_model("transcripts", "JobItem")
    Revision = apps.get_model("transcripts", "Revision")
    AuditRecord = apps.get_model("transcripts", "AuditRecord")
    Job = apps.get_model("transcripts", "Job")
    for item in JobItem.objects.filter(base__isnull=True).select_related("revision", "session"):
        if item.revision is not None:
            item.base_id = item.revision.parent_id
        else:
            item.base_id = item.session.head_id or (
                Revision.objects.filter(session=item.session_id, number=0)
                .values_list("pk", flat=True)
                .first()
            )
        item.save(update_fields=["base"])
    AuditRecord.objects.filter(job__isnull=False).update(
        policy=Subquery(Job.objects.filter(pk=OuterRef("job")).values("policy")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("transcripts", "0004_bulk_jobs"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
