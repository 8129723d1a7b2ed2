# Which version wrote a reply moves from arena.Reply (which pointed up at the registry) to
# policies.ReplyAuthor, copied here before the arena drops its column (run_before: the arrow
# is declared by the registry, above the arena).

import django.db.models.deletion
from django.db import migrations, models

BATCH = 1000


def authors_from_replies(apps, schema_editor):
    Reply = apps.get_model("arena", "Reply")
    ReplyAuthor = apps.get_model("policies", "ReplyAuthor")
    written = Reply.objects.filter(policy_version__isnull=False).values_list(
        "pk", "policy_version_id"
    )
    ReplyAuthor.objects.bulk_create(
        (
            ReplyAuthor(reply_id=reply_id, version_id=version_id)
            for reply_id, version_id in written.iterator(chunk_size=BATCH)
        ),
        batch_size=BATCH,
    )


def replies_from_authors(apps, schema_editor):
    Reply = apps.get_model("arena", "Reply")
    ReplyAuthor = apps.get_model("policies", "ReplyAuthor")
    for reply_id, version_id in ReplyAuthor.objects.values_list("reply_id", "version_id"):
        Reply.objects.filter(pk=reply_id).update(policy_version_id=version_id)


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0008_one_world_per_version"),
        ("arena", "0009_judge_jobs_name_their_world"),
    ]
    run_before = [("arena", "0010_reply_author_in_the_registry")]

    operations = [
        migrations.CreateModel(
            name="ReplyAuthor",
            fields=[
                (
                    "reply",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="author",
                        serialize=False,
                        to="arena.reply",
                    ),
                ),
                (
                    "version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="replies_written",
                        to="policies.policyversion",
                    ),
                ),
            ],
        ),
        migrations.RunPython(authors_from_replies, replies_from_authors),
    ]
