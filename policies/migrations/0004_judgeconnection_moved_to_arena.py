# JudgeConnection is the arena's now (arena 0004 took it over, table and all): forget it here
# without dropping the table.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('arena', '0004_judgeconnection'),
        ('policies', '0003_live_and_canary'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='JudgeConnection'),
            ],
            database_operations=[],
        ),
    ]
