# The job platform moved from training to levers9.jobs (label "jobs"). The table stays
# `training_job`: this migration only tells Django's state where the model now lives.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("arena", "0001_initial"),
        ("policies", "0001_initial"),
        ("training", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Job",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("kind", models.CharField(max_length=20)),
                        (
                            "trainer",
                            models.CharField(
                                help_text="e.g. q-learning-online, rlhf, dpo", max_length=60
                            ),
                        ),
                        ("title", models.CharField(blank=True, max_length=200)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("packing", "Packing"),
                                    ("submitted", "Submitted"),
                                    ("running", "Running"),
                                    ("finishing", "Finishing"),
                                    ("done", "Done"),
                                    ("failed", "Failed"),
                                    ("interrupted", "Interrupted"),
                                    ("cancelled", "Cancelled"),
                                ],
                                default="packing",
                                max_length=20,
                            ),
                        ),
                        ("spec_path", models.CharField(blank=True, max_length=500)),
                        ("task_id", models.CharField(blank=True, db_index=True, max_length=64)),
                        ("workspace_schema", models.CharField(max_length=63)),
                        ("preference_version", models.PositiveIntegerField(blank=True, null=True)),
                        ("base_model", models.CharField(blank=True, max_length=200)),
                        ("pool_name", models.CharField(max_length=60)),
                        ("card_type", models.CharField(max_length=100)),
                        ("card_count", models.PositiveSmallIntegerField(default=1)),
                        ("card_allocation_id", models.PositiveIntegerField(blank=True, null=True)),
                        ("progress_step", models.PositiveIntegerField(default=0)),
                        ("progress_total", models.PositiveIntegerField(default=0)),
                        ("metrics", models.JSONField(blank=True, default=dict)),
                        ("result", models.JSONField(blank=True, null=True)),
                        ("error", models.TextField(blank=True)),
                        ("notes", models.TextField(blank=True)),
                        ("finish_needs", models.JSONField(blank=True, default=dict)),
                        ("watcher", models.CharField(blank=True, max_length=100)),
                        ("watched_at", models.DateTimeField(blank=True, null=True)),
                        ("worker", models.CharField(blank=True, max_length=100)),
                        ("trainer_pid", models.PositiveIntegerField(blank=True, null=True)),
                        ("heartbeat_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("submitted_at", models.DateTimeField(blank=True, null=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("finish_claimed_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "parent_version",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="child_jobs",
                                to="policies.policyversion",
                            ),
                        ),
                        (
                            "produced_version",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="produced_by_jobs",
                                to="policies.policyversion",
                            ),
                        ),
                        (
                            "started_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "world",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="jobs",
                                to="arena.world",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "training_job",
                        "ordering": ["-created_at"],
                        "indexes": [
                            models.Index(fields=["state"], name="training_jo_state_191524_idx")
                        ],
                    },
                ),
            ],
        ),
    ]
