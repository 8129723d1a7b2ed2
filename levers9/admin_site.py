"""One admin site, scoped by schema: the public host shows the platform, a workspace host its own.

Every registered ModelAdmin (ours and third parties', e.g. django-q2's queue) is wrapped once
so that a model is only reachable where its table lives and by whom may see it:
  public host     platform models (workspaces, domains, the task queue), superusers only
  workspace host  workspace models; ours check roles themselves (RoleAdminMixin), the rest
                  (users, groups, tokens) need the owner role.
Without this, the shared queue's admin would show one workspace the tasks of every other.
API tokens get our own admin (levers9.token_admin): a raw key is shown once, at creation.
Every bulk action refuses a selection that holds something other than an id of its model (a
word, a number past the column's range), with a message, where Django's filter raised a 500.
"""

from __future__ import annotations

from functools import wraps

from django.apps import apps
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.apps import AdminConfig
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db import connection
from django_tenants.utils import get_public_schema_name

_PERMISSION_METHODS = (
    "has_module_permission",
    "has_view_permission",
    "has_add_permission",
    "has_change_permission",
    "has_delete_permission",
)


def _labels(app_names: list[str]) -> set[str]:
    return {config.label for config in apps.get_app_configs() if config.name in app_names}


def _reachable(request, model, model_admin) -> bool:
    from levers9.roles import OWNER, RoleAdminMixin, has_role

    label = model._meta.app_label
    if connection.schema_name == get_public_schema_name():
        return label in _labels(settings.SHARED_APPS) and request.user.is_superuser
    if label not in _labels(settings.TENANT_APPS):
        return False
    return isinstance(model_admin, RoleAdminMixin) or has_role(request.user, OWNER)


def _scoped(method, model, model_admin):
    @wraps(method)
    def check(request, *args, **kwargs):
        return _reachable(request, model, model_admin) and method(request, *args, **kwargs)

    return check


def _is_id(model, value: str) -> bool:
    """Whether `value` can be an id of `model`: its type, and for an integer its column's range
    (the field's validators hold the range)."""
    field = model._meta.pk
    try:
        field.run_validators(field.to_python(value))
    except ValidationError:
        return False
    return True


def _ids_checked(response_action, model, model_admin):
    @wraps(response_action)
    def check(request, queryset):
        selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
        not_ids = [value for value in selected if not _is_id(model, value)]
        if not not_ids:
            return response_action(request, queryset)
        shown = not_ids[0] if len(not_ids[0]) <= 40 else f"{not_ids[0][:40]}..."
        model_admin.message_user(
            request,
            f'"{shown}" is not an id of a {model._meta.verbose_name}: select the rows in the '
            "list. No items have been changed.",
            messages.ERROR,
        )
        return None  # the changelist's own answer: back to the list, where the message shows

    return check


class Levers9AdminSite(admin.AdminSite):
    site_header = "Levers9 Arena"
    site_title = "Levers9 Arena admin"
    index_title = "Control panel"

    def register(self, model_or_iterable, admin_class=None, **options):
        from rest_framework.authtoken.models import TokenProxy

        from levers9.token_admin import TokenAdmin

        # DRF's token admin lists raw keys: ours shows a key once, when it is created.
        models = (
            [model_or_iterable] if isinstance(model_or_iterable, type) else list(model_or_iterable)
        )
        if TokenProxy in models:
            admin_class = TokenAdmin
        return super().register(models, admin_class, **options)

    def get_urls(self):
        # URLs are built after every app registered its admins: scope them all here, once.
        for model, model_admin in self._registry.items():
            if getattr(model_admin, "_levers9_scoped", False):
                continue
            for name in _PERMISSION_METHODS:
                setattr(model_admin, name, _scoped(getattr(model_admin, name), model, model_admin))
            model_admin.response_action = _ids_checked(
                model_admin.response_action, model, model_admin
            )
            model_admin._levers9_scoped = True
        return super().get_urls()


class Levers9AdminConfig(AdminConfig):
    default_site = "levers9.admin_site.Levers9AdminSite"
