# Held-out calls are now flagged on arena's calls (arena.held_out). Worlds that already chose
# their held-out set keep exactly those calls.

from django.db import migrations

HELD_OUT_CALLS = 40


def flag_existing(apps, schema_editor):
    Call = apps.get_model("arena", "Call")
    HeldOutCall = apps.get_model("evaluation", "HeldOutCall")
    World = apps.get_model("arena", "World")
    for world in World.objects.all():
        if Call.objects.filter(world=world).count() < 2 * HELD_OUT_CALLS:
            continue  # too small to spare them: nothing was kept back
        chosen = HeldOutCall.objects.filter(
            call_set__world=world, call__isnull=False
        ).values_list("call_id", flat=True)
        Call.objects.filter(pk__in=list(chosen)).update(held_out=True)


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0002_job_in_levers9_jobs'),
        ('arena', '0003_call_held_out'),
    ]

    operations = [migrations.RunPython(flag_existing, migrations.RunPython.noop)]
