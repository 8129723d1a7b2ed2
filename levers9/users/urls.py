"""Pages of a workspace's users: the owner's Users page and the invitation link."""

from __future__ import annotations

from django.urls import path

from levers9.users import views

urlpatterns = [
    path("users/", views.users_page, name="users"),
    path("users/invite/", views.user_invite, name="user-invite"),
    path("users/<int:user_id>/role/", views.user_role_change, name="user-role"),
    path("users/<int:user_id>/remove/", views.user_remove, name="user-remove"),
    path(
        "users/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="invitation-revoke",
    ),
    # The token is URL-safe base64 (secrets.token_urlsafe): letters, digits, - and _.
    path("invite/<str:token>/", views.invite_accept, name="invite-accept"),
]
