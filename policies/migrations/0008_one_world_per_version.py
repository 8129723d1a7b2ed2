"""Every version, live period and canary now has its world (0007): the world is required,
numbers are unique per world, and each world has at most one open live period and one
running canary."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0007_versions_keep_their_world"),
    ]

    operations = [
        migrations.AlterField(
            model_name="policyversion",
            name="world",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="policy_versions",
                to="arena.world",
            ),
        ),
        migrations.AlterField(
            model_name="liveperiod",
            name="world",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="+", to="arena.world"
            ),
        ),
        migrations.AlterField(
            model_name="canary",
            name="world",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="+", to="arena.world"
            ),
        ),
        migrations.AddConstraint(
            model_name="policyversion",
            constraint=models.UniqueConstraint(
                fields=("world", "number"), name="version_number_per_world"
            ),
        ),
        migrations.AddConstraint(
            model_name="liveperiod",
            constraint=models.UniqueConstraint(
                condition=models.Q(("current", True)),
                fields=("world",),
                name="one_live_version_per_world",
            ),
        ),
        migrations.AddConstraint(
            model_name="canary",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "running")),
                fields=("world",),
                name="one_running_canary_per_world",
            ),
        ),
    ]
