"""Versions, live periods and canaries get a world (nullable until 0007 fills it in); a
version's number stops being unique across the workspace (0008 makes it unique per world).

In three migrations, each in its own transaction: PostgreSQL refuses to alter a table whose
rows were just updated in the same transaction ("pending trigger events")."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0008_world_moves_described"),
        ("policies", "0005_baseline_describes_no_world"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="liveperiod", name="one_live_version"),
        migrations.RemoveConstraint(model_name="canary", name="one_running_canary"),
        migrations.AlterField(
            model_name="policyversion", name="number", field=models.PositiveIntegerField()
        ),
        migrations.AddField(
            model_name="policyversion",
            name="world",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="policy_versions",
                to="arena.world",
            ),
        ),
        migrations.AddField(
            model_name="liveperiod",
            name="world",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="arena.world",
            ),
        ),
        migrations.AddField(
            model_name="canary",
            name="world",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="arena.world",
            ),
        ),
        migrations.AlterModelOptions(
            name="policyversion", options={"ordering": ["world_id", "number"]}
        ),
    ]
