import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("transcripts", "0005_bulk_jobs_backfill"),
    ]

    operations = [
        migrations.AlterField(
            model_name="jobitem",
            name="base",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="transcripts.revision",
            ),
        ),
    ]
