# A judge job's world is read from what its finish needs ({"world": pk}), no longer from the
# platform's job, which drops its world column: every judge job is made to name it first
# (run_before: the arrow is declared here, by the app above the platform).

from django.db import migrations

JUDGE_KINDS = ("judge-fit", "judge-measure")


def judge_jobs_name_their_world(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(kind__in=JUDGE_KINDS, world__isnull=False):
        needs = dict(job.finish_needs or {})
        if needs.get("world") is None:
            needs["world"] = job.world_id
            Job.objects.filter(pk=job.pk).update(finish_needs=needs)


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0008_world_moves_described"),
        ("jobs", "0003_job_background"),
    ]
    run_before = [("jobs", "0004_job_is_the_platforms")]

    operations = [
        migrations.RunPython(judge_jobs_name_their_world, migrations.RunPython.noop),
    ]
