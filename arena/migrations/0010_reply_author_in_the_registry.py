# A reply no longer names the version that wrote it: the registry above keeps that
# (policies.ReplyAuthor, copied by policies 0009, which runs before this one).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0009_judge_jobs_name_their_world"),
    ]

    operations = [
        migrations.RemoveField(model_name="reply", name="policy_version"),
    ]
