"""A signed-in session made as the login view makes it, for tests that connect without logging
in: a websocket, or a stand-in worker in a process of its own. Import it after Django is set up."""

from __future__ import annotations

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django_tenants.utils import schema_context


def signed_in_session_key(schema_name: str, username: str) -> str:
    """The session cookie's value that signs the workspace's user in."""
    with schema_context(schema_name):
        user = get_user_model().objects.get(username=username)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        return session.session_key
