"""Preference versions belong to a world (issue 40, point 1).

A version frozen before this held every world's picks, so training in one world read another
business's. Each such version stays as it was (its file and sha256 unchanged, still readable)
and is marked mixed; it is never trained on. Each world gets its own versions split from the
mixed ones: for every mixed version, each world that had picks added in it gets a version of
its own holding its picks up to the same watermark, with the files written anew in the
world's folder. Their numbers start after the highest mixed number, so "preferences v3" names
one version a world can read; the pairs a mixed version closed point at their world's split.
"""

from pathlib import Path

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def split_mixed_versions(apps, schema_editor) -> None:
    from django.conf import settings as live_settings

    from arena.selectors import preferences_dir
    from arena.services.freeze import preference_files_write

    PreferenceVersion = apps.get_model("arena", "PreferenceVersion")
    Pick = apps.get_model("arena", "Pick")
    DuelPair = apps.get_model("arena", "DuelPair")
    World = apps.get_model("arena", "World")

    mixed = list(PreferenceVersion.objects.filter(world__isnull=True).order_by("number"))
    if not mixed:
        return
    PreferenceVersion.objects.filter(world__isnull=True).update(is_mixed=True)
    first_number = mixed[-1].number + 1
    latest = {}  # world id -> that world's newest split version
    floor = 0
    for source in mixed:
        added_by_world = {}
        for world_id in Pick.objects.filter(
            id__gt=floor, id__lte=source.last_pick_id
        ).values_list("world_id", flat=True):
            added_by_world[world_id] = added_by_world.get(world_id, 0) + 1
        for world_id, added in sorted(added_by_world.items()):
            world = World.objects.get(pk=world_id)
            previous = latest.get(world_id)
            version = PreferenceVersion.objects.create(
                world=world,
                number=previous.number + 1 if previous else first_number,
                extends=previous,
                last_pick_id=source.last_pick_id,
                picks_added=added,
                row_count=(previous.row_count if previous else 0) + added,
                created_by_id=source.created_by_id,
                created_by_name=source.created_by_name,
            )
            written = preference_files_write(
                number=version.number,
                world_id=world_id,
                last_pick_id=version.last_pick_id,
                extends=previous.number if previous else None,
                previous_count=previous.row_count if previous else 0,
                directory=preferences_dir(world),
            )
            if written.count != version.row_count:
                raise RuntimeError(
                    f"{world.slug} v{version.number} wrote {written.count} rows, "
                    f"expected {version.row_count}"
                )
            version.sha256 = written.sha256
            version.size_bytes = written.size_bytes
            version.file_path = str(written.path.relative_to(Path(live_settings.DATASETS_DIR)))
            version.save(update_fields=["sha256", "size_bytes", "file_path"])
            DuelPair.objects.filter(world_id=world_id, frozen_in=source).update(frozen_in=version)
            latest[world_id] = version
        floor = source.last_pick_id


class Migration(migrations.Migration):

    dependencies = [
        ('arena', '0011_duelpair_judge_gap'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='preferenceversion',
            name='is_mixed',
            field=models.BooleanField(default=False, help_text='Frozen before versions belonged to a world: it holds picks of several worlds. Kept readable, never trained on.'),
        ),
        migrations.AddField(
            model_name='preferenceversion',
            name='world',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='preference_versions', to='arena.world'),
        ),
        migrations.AlterField(
            model_name='preferenceversion',
            name='number',
            field=models.PositiveIntegerField(),
        ),
        migrations.AddConstraint(
            model_name='preferenceversion',
            constraint=models.UniqueConstraint(fields=('world', 'number'), name='preference_version_numbered_per_world'),
        ),
        migrations.AddConstraint(
            model_name='preferenceversion',
            constraint=models.UniqueConstraint(condition=models.Q(('world__isnull', True)), fields=('number',), name='mixed_preference_version_numbered_once'),
        ),
        migrations.RunPython(split_mixed_versions, migrations.RunPython.noop),
    ]
