# The Job model now lives in levers9.jobs (label "jobs") on the same table: state only.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('training', '0001_initial'),
        ('jobs', '0001_initial'),
        ('evaluation', '0002_job_in_levers9_jobs'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name='Job')],
        ),
    ]
