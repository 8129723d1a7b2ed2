"""A workspace's users and invitations, managed by its owners (tenant schema).

The Users page and API: invite by e-mail with a role (no e-mail is sent: the owner copies the
invitation link), change a role, remove. Users themselves are Django's, in the workspace's own
schema; their roles are groups there (levers9.roles).
"""
