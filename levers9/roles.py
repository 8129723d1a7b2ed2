"""The three workspace roles and how pages, API and admin check them.

Roles are ordered: an owner can do what a manager can, a manager what a reviewer can.
  reviewer  Duel (compare and approve)
  manager   Freeze, Train, Evaluate
  owner     Make live, Release, Endpoints, users
Each role is a Django group in the workspace's own schema, so a user of one workspace holds no
role anywhere else.
"""

from __future__ import annotations

from functools import wraps
from typing import TYPE_CHECKING

from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.contrib.auth.models import AbstractBaseUser

REVIEWER, MANAGER, OWNER = "reviewer", "manager", "owner"
ROLES: tuple[str, ...] = (REVIEWER, MANAGER, OWNER)
ROLE_HELP = {
    REVIEWER: "Duel: compare replies and approve or overrule the judge.",
    MANAGER: "Freeze preferences, train and evaluate versions.",
    OWNER: "Make versions live, release and serve endpoints, manage users.",
}


def roles_ensure_groups() -> None:
    """Create the role groups in the current schema (idempotent)."""
    for role in ROLES:
        Group.objects.get_or_create(name=role)


def user_role(user: AbstractBaseUser | None) -> str | None:
    """The highest role a user holds in the current workspace, or None."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return OWNER
    cached = getattr(user, "_levers9_role", "unset")
    if cached != "unset":
        return cached
    names = set(user.groups.values_list("name", flat=True))
    role = next((role for role in reversed(ROLES) if role in names), None)
    user._levers9_role = role
    return role


def has_role(user: AbstractBaseUser | None, role: str) -> bool:
    held = user_role(user)
    return held is not None and ROLES.index(held) >= ROLES.index(role)


def user_set_role(*, user: AbstractBaseUser, role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"Unknown role '{role}': choose one of {', '.join(ROLES)}.")
    roles_ensure_groups()
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    user.groups.add(Group.objects.get(name=role))
    user.__dict__.pop("_levers9_role", None)


def role_required(role: str) -> Callable:
    """Page decorator: login first, then the role, else 403 with the role named."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            from django.contrib.auth.views import redirect_to_login

            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This page needs the {role} role in this workspace.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


class HasRole(BasePermission):
    """DRF permission: `permission_classes = [HasRole.at_least(MANAGER)]`."""

    required_role = REVIEWER
    message = "You need a role in this workspace."

    @classmethod
    def at_least(cls, role: str) -> type[HasRole]:
        return type(
            f"HasRole_{role}",
            (cls,),
            {"required_role": role, "message": f"This needs the {role} role in this workspace."},
        )

    def has_permission(self, request, view) -> bool:
        return has_role(request.user, self.required_role)


class RoleAdminMixin:
    """Admin mixin: viewing needs `view_role`, changing needs `change_role`."""

    view_role = REVIEWER
    change_role = MANAGER

    def has_module_permission(self, request) -> bool:
        return has_role(request.user, self.view_role)

    def has_view_permission(self, request, obj=None) -> bool:
        return has_role(request.user, self.view_role)

    def has_add_permission(self, request, *args) -> bool:
        return has_role(request.user, self.change_role)

    def has_change_permission(self, request, obj=None) -> bool:
        return has_role(request.user, self.change_role)

    def has_delete_permission(self, request, obj=None) -> bool:
        return has_role(request.user, self.change_role)
