from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

import transcripts.fields


def mark_unreadable(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Mark the failed items whose error says their blob could not be read (a retry cannot help)."""
    JobItem = apps.get_model("transcripts", "JobItem")
    JobItem.objects.filter(status="failed", error__startswith="BlobUnreadable: ").update(
        unreadable=True
    )


class Migration(migrations.Migration):
    dependencies = [
        ("transcripts", "0022_parent_loop"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="retry_at",
            field=models.DateTimeField(
                blank=True, help_text="When the waiting chunk is retried.", null=True
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="waiting_error",
            field=transcripts.fields.StorableTextField(
                blank=True, help_text="The error that service gave."
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="waiting_for",
            field=models.CharField(
                blank=True, help_text="The service a chunk of the job waits for.", max_length=40
            ),
        ),
        migrations.AddField(
            model_name="jobitem",
            name="unreadable",
            field=models.BooleanField(
                default=False,
                help_text="Failed because the session's stored file is missing or damaged: "
                "a retry cannot succeed.",
            ),
        ),
        migrations.RunPython(mark_unreadable, migrations.RunPython.noop),
    ]
