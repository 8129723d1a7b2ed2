# An arena job's world moves from what its finish needs ({"world": pk}, arena 0009) to the
# arena's own table, JobWorld (issue 43, point 2), with what each kind's work reads: a judge
# fit's read_up_to, a Duel pairs job's count, scenario and versions. Run in every workspace's
# schema; finish_needs is left as it was (the API shows what it holds over the row's), and a
# job whose world is gone gets no row. Going back drops the table: nothing else moved.

import django.db.models.deletion
from django.db import migrations, models

JUDGE_FIT = "judge-fit"
DUEL_PAIRS = "duel-pairs"
ARENA_KINDS = (JUDGE_FIT, "judge-measure", DUEL_PAIRS)


def _whole(value):
    """An int stored in JSON (never a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value):
    """What the row's unsigned column can hold of a count stored in JSON."""
    return max(_whole(value) or 0, 0)


def _about(job, needs):
    if job.kind == JUDGE_FIT:
        read = needs.get("read_up_to")
        if not isinstance(read, dict):
            return {}
        # A key an old fit did not keep counted as 0 at its end.
        return {
            "read_up_to_pick": _count(read.get("pick")),
            "read_up_to_override": _count(read.get("override")),
        }
    if job.kind == DUEL_PAIRS:
        versions = needs.get("versions")
        return {
            "pairs_count": _count(needs.get("count")),
            "pairs_scenario": str(needs.get("scenario") or ""),
            "pairs_versions": versions if isinstance(versions, list) else [],
        }
    return {}


def job_worlds_from_finish_needs(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    World = apps.get_model("arena", "World")
    JobWorld = apps.get_model("arena", "JobWorld")
    for job in Job.objects.filter(kind__in=ARENA_KINDS).iterator():
        needs = job.finish_needs if isinstance(job.finish_needs, dict) else {}
        world = _whole(needs.get("world"))
        if world is not None and World.objects.filter(pk=world).exists():
            JobWorld.objects.get_or_create(
                job=job, defaults={"world_id": world, **_about(job, needs)}
            )


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0014_world_reasons_and_rubric"),
        ("jobs", "0004_job_is_the_platforms"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobWorld",
            fields=[
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="arena_world",
                        serialize=False,
                        to="jobs.job",
                    ),
                ),
                ("read_up_to_pick", models.PositiveBigIntegerField(blank=True, null=True)),
                ("read_up_to_override", models.PositiveBigIntegerField(blank=True, null=True)),
                ("pairs_count", models.PositiveIntegerField(blank=True, null=True)),
                ("pairs_scenario", models.TextField(blank=True)),
                ("pairs_versions", models.JSONField(blank=True, default=list)),
                (
                    "world",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="jobs_about",
                        to="arena.world",
                    ),
                ),
            ],
        ),
        migrations.RunPython(job_worlds_from_finish_needs, migrations.RunPython.noop),
    ]
