from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("levers9", "0003_workspace_job_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="cardallocation",
            name="expected_seconds",
            field=models.FloatField(
                blank=True,
                help_text="How long the holder was expected to hold the cards when it asked (a "
                "job's estimate; empty: not known). The line's wait estimates read it.",
                null=True,
            ),
        ),
    ]
