# "Most informative first" orders the queue by how far apart the pair's own judge put its two
# replies: stored on the pair (judge_gap) with a partial index beside "weakest first"'s, so
# serving reads the index instead of joining two judgements for every open pair and sorting.
# Pairs made before it get the gap the queue computed for them until now: the newest
# judgement of each reply by the pair's judge that is not a rescoring's.

from django.db import migrations, models

BACKFILL = """
UPDATE arena_duelpair AS pair
SET judge_gap = abs(
    (SELECT judgement.total FROM arena_judgement AS judgement
     WHERE judgement.reply_id = pair.reply_a_id AND judgement.judge_model = pair.judge_model
       AND NOT judgement.overruled
     ORDER BY judgement.created_at DESC, judgement.id DESC LIMIT 1)
  - (SELECT judgement.total FROM arena_judgement AS judgement
     WHERE judgement.reply_id = pair.reply_b_id AND judgement.judge_model = pair.judge_model
       AND NOT judgement.overruled
     ORDER BY judgement.created_at DESC, judgement.id DESC LIMIT 1)
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0010_reply_author_in_the_registry"),
    ]

    operations = [
        migrations.AddField(
            model_name="duelpair",
            name="judge_gap",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="duelpair",
            index=models.Index(
                condition=models.Q(("is_open", True)),
                fields=["world", "judge_gap", "judge_total", "id"],
                name="duelpair_queue_informative",
            ),
        ),
    ]
