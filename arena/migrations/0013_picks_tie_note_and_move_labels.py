"""A pick may be a tie or both bad, and carry the reviewer's note (issue 40, point 10); and the
turns of calls imported before the move labeller kept the opening move at the call's start are
labelled again with their world's moves (issue 40, point 4: 1,811 of a marketplace's 2,315
agent turns were "greet"). Reviewers' corrections are kept
(arena.services.move_labels.calls_label_moves).
"""


from django.db import migrations, models


def label_turns_again(apps, schema_editor) -> None:
    from arena.models import World
    from arena.services.move_labels import calls_label_moves

    with_calls = apps.get_model("arena", "Call").objects.values_list("world_id", flat=True)
    # The live model reads only the columns the labeller needs: a later migration's columns
    # are not there yet when this one runs.
    for world in World.objects.filter(pk__in=set(with_calls)).only("id", "slug", "moves"):
        calls_label_moves(world=world)


class Migration(migrations.Migration):

    dependencies = [
        ('arena', '0012_preference_versions_per_world'),
    ]

    operations = [
        migrations.AddField(
            model_name='pick',
            name='kind',
            field=models.CharField(choices=[('preference', 'Preference'), ('tie', 'Tie'), ('both_bad', 'Both bad')], default='preference', max_length=12),
        ),
        migrations.AddField(
            model_name='pick',
            name='note',
            field=models.TextField(blank=True),
        ),
        migrations.RunPython(label_turns_again, migrations.RunPython.noop),
    ]
