# The judge's wiring moved from policies to arena. The table stays where it is
# (policies_judgeconnection); only the model's owner changes, so the database is untouched.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('arena', '0003_call_held_out'),
        ('policies', '0002_providers_and_endpoints'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='JudgeConnection',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('endpoint_url', models.URLField(blank=True)),
                        ('lora_adapter', models.CharField(blank=True, max_length=200)),
                        ('api_key_env', models.CharField(blank=True, max_length=64)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('world', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='judge_connection', to='arena.world')),
                    ],
                    options={
                        'db_table': 'policies_judgeconnection',
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
