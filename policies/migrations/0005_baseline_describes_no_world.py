"""v1 · baseline's description named lettings moves (a viewing, a slot), and every world's
Policies page shows it: the one a workspace was given is replaced by a world-neutral one.
A description someone has edited since is left as it is."""

from django.db import migrations

OLD = (
    "Hand-written start: greet, give details, handle the objection when one is open, "
    "reassure, propose a viewing once there is trust, offer a slot once a viewing is agreed, "
    "then close. Scripted wording on the simulator."
)
NEW = (
    "Hand-written start. Where the world has a simulator: scripted move rules and scripted "
    "wording. Where it has only recorded calls: the real agent's reply at the most similar "
    "moment of another of the world's calls."
)


def forwards(apps, schema_editor):
    apps.get_model("policies", "PolicyVersion").objects.filter(description=OLD).update(
        description=NEW
    )


def backwards(apps, schema_editor):
    apps.get_model("policies", "PolicyVersion").objects.filter(description=NEW).update(
        description=OLD
    )


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0004_judgeconnection_moved_to_arena"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
