# The cache table (issue 41): sign-in lockouts and API throttles counted where every web process
# and a restart see them. In the public schema, as levers9 is a shared app: a workspace's
# search path ends in public, so the table is found from every workspace. The same table
# `manage.py createcachetable` makes (levers9_cache, settings.CACHES); written out because that
# command asks the tenant router, which knows no app of Django's cache table, and skips it.

from django.db import migrations

CREATE = """
CREATE TABLE IF NOT EXISTS "levers9_cache" (
    "cache_key" varchar(255) NOT NULL PRIMARY KEY,
    "value" text NOT NULL,
    "expires" timestamp with time zone NOT NULL
);
CREATE INDEX IF NOT EXISTS "levers9_cache_expires" ON "levers9_cache" ("expires");
"""


class Migration(migrations.Migration):

    dependencies = [
        ('levers9', '0004_cardallocation_expected_seconds'),
    ]

    operations = [
        migrations.RunSQL(CREATE, reverse_sql='DROP TABLE IF EXISTS "levers9_cache";'),
    ]
