# Per-workspace limits on queued and running jobs (issue 15: fair shares of the pools).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('levers9', '0002_pools'),
    ]

    operations = [
        migrations.AddField(
            model_name='workspace',
            name='queued_jobs_limit',
            field=models.PositiveSmallIntegerField(default=20, help_text='Jobs that may wait for cards at once; starting one more is refused (429).'),
        ),
        migrations.AddField(
            model_name='workspace',
            name='running_jobs_limit',
            field=models.PositiveSmallIntegerField(default=4, help_text='Jobs that may hold cards at once; the next ones wait in line until one ends.'),
        ),
    ]
