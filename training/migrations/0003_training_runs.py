# What a training job is about moves from the platform's job to training.TrainingRun: one row
# per Train card and Engines run, copied from the job's old columns before the platform drops
# them (run_before: the arrow is declared here, by the app above the platform).

import django.db.models.deletion
from django.db import migrations, models

TRAINING_KINDS = ("train", "engines")
BATCH = 1000


def runs_from_jobs(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    TrainingRun = apps.get_model("training", "TrainingRun")
    jobs = Job.objects.filter(kind__in=TRAINING_KINDS).values_list(
        "pk",
        "world_id",
        "parent_version_id",
        "produced_version_id",
        "preference_version",
        "base_model",
    )
    TrainingRun.objects.bulk_create(
        (
            TrainingRun(
                job_id=job_id,
                world_id=world_id,
                parent_version_id=parent_id,
                produced_version_id=produced_id,
                preference_version=preference_version,
                base_model=base_model,
            )
            for job_id, world_id, parent_id, produced_id, preference_version, base_model in jobs
        ),
        batch_size=BATCH,
    )


def jobs_from_runs(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    TrainingRun = apps.get_model("training", "TrainingRun")
    for run in TrainingRun.objects.all():
        Job.objects.filter(pk=run.job_id).update(
            world_id=run.world_id,
            parent_version_id=run.parent_version_id,
            produced_version_id=run.produced_version_id,
            preference_version=run.preference_version,
            base_model=run.base_model,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0002_job_moved_to_levers9_jobs"),
        ("jobs", "0003_job_background"),
        ("arena", "0008_world_moves_described"),
        ("policies", "0008_one_world_per_version"),
    ]
    run_before = [("jobs", "0004_job_is_the_platforms")]

    operations = [
        migrations.CreateModel(
            name="TrainingRun",
            fields=[
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="training_run",
                        serialize=False,
                        to="jobs.job",
                    ),
                ),
                ("preference_version", models.PositiveIntegerField(blank=True, null=True)),
                ("base_model", models.CharField(blank=True, max_length=200)),
                (
                    "parent_version",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="child_runs",
                        to="policies.policyversion",
                    ),
                ),
                (
                    "produced_version",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="produced_by_runs",
                        to="policies.policyversion",
                    ),
                ),
                (
                    "world",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="training_runs",
                        to="arena.world",
                    ),
                ),
            ],
        ),
        migrations.RunPython(runs_from_jobs, jobs_from_runs),
    ]
