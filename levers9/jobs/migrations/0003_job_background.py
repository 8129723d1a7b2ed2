from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_phase_progress"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="background",
            field=models.BooleanField(
                default=False,
                help_text="Started by the platform, not by a person: runs in the pool's "
                "background lane and yields to jobs a person started.",
            ),
        ),
    ]
