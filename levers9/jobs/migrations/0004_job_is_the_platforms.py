# The job keeps the platform's fields only: what a job is about (its world, the versions it
# starts from and made, the preferences and base it learned on) moved to the apps of its kinds,
# whose migrations copy it before this one runs (each declares `run_before` this migration,
# so the arrow is theirs: the platform names no app above it). The table gets the name of
# what it holds.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_job_background"),
    ]

    operations = [
        migrations.RemoveField(model_name="job", name="world"),
        migrations.RemoveField(model_name="job", name="parent_version"),
        migrations.RemoveField(model_name="job", name="produced_version"),
        migrations.RemoveField(model_name="job", name="preference_version"),
        migrations.RemoveField(model_name="job", name="base_model"),
        migrations.RenameIndex(
            model_name="job",
            new_name="jobs_job_state_idx",
            old_name="training_jo_state_191524_idx",
        ),
        migrations.AlterModelTable(name="job", table=None),
    ]
