"""What is queried of a version's learned_from becomes typed columns (its algorithm, indexed;
a wording version's frozen preference version and base), and learned_from gets the schema it
was written under. Every row keeps its learned_from as it was; the columns are copied from it.
"""

from django.db import migrations, models


def _whole_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def copy_learned_columns(apps, schema_editor):
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    for version in PolicyVersion.objects.all().only("pk", "learned_from"):
        learned = version.learned_from if isinstance(version.learned_from, dict) else {}
        algorithm = learned.get("algorithm")
        base = learned.get("base")
        PolicyVersion.objects.filter(pk=version.pk).update(
            algorithm=algorithm[:60] if isinstance(algorithm, str) else "",
            preference_version=_whole_number(learned.get("preference_version")),
            base_model=base[:200] if isinstance(base, str) else "",
        )


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0009_reply_authors"),
    ]

    operations = [
        migrations.AddField(
            model_name="policyversion",
            name="algorithm",
            field=models.CharField(blank=True, db_index=True, max_length=60),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="base_model",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="learned_schema",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="preference_version",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        # Reversed, the columns go with their fields: learned_from never changed.
        migrations.RunPython(copy_learned_columns, migrations.RunPython.noop),
    ]
