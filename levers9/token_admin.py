"""The API tokens' admin (tenant schema): a token is shown once, in the message after it is
created, and never again — not in the list, the change form, a URL or the recent actions.

DRF's own TokenAdmin lists every user's raw key to whoever may open it; and a token's primary
key and `str()` are both its key, which the admin otherwise writes into page titles, messages,
links and its log. So rows are addressed by their user's id (as DRF's admin does), named by
their user, and logged as a change of the user. The admin site puts this class in place of
DRF's when DRF registers it (levers9.admin_site).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.urls import reverse
from rest_framework.authtoken.models import TokenProxy


def _token_label(token: TokenProxy) -> str:
    return f"API token of {token.user}"


# Only the admin's proxy model changes: `Token` itself (the API's authentication) keeps its str.
TokenProxy.__str__ = _token_label


class _TokenChangeList(ChangeList):
    def url_for_result(self, result):
        # The token's own pk is its key: link by the user's id instead.
        opts = self.opts
        return reverse(
            f"admin:{opts.app_label}_{opts.model_name}_change",
            args=(quote(result.user.pk),),
            current_app=self.model_admin.admin_site.name,
        )


class TokenAdmin(admin.ModelAdmin):
    list_display = ("user", "created")
    list_filter = ("created",)
    search_fields = (f"user__{get_user_model().USERNAME_FIELD}",)
    search_help_text = "Username"
    ordering = (f"user__{get_user_model().USERNAME_FIELD}",)
    actions = None  # the bulk delete would address rows by their key

    def get_fields(self, request, obj=None):
        return ("user", "created") if obj is not None else ("user",)

    def get_readonly_fields(self, request, obj=None):
        # A token belongs to one user for good: delete it and create another to rotate.
        return ("user", "created") if obj is not None else ()

    def get_changelist(self, request, **kwargs):
        return _TokenChangeList

    def get_object(self, request, object_id, from_field=None):
        """The token of the user whose id is in the URL."""
        user_model = get_user_model()
        try:
            user_id = user_model._meta.pk.to_python(object_id)
            return self.get_queryset(request).get(user__pk=user_id)
        except (TokenProxy.DoesNotExist, ValidationError, ValueError):
            return None

    def response_add(self, request, obj, post_url_continue=None):
        messages.success(
            request,
            f"The API token of {obj.user} is {obj.key} — copy it now: it is not shown again. "
            "Send it as the header `Authorization: Token <token>`.",
        )
        opts = self.opts
        return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))

    # --- the admin's log names the user, never the key -----------------------------------

    def _log_on_users(self, request, users, message: str):
        return LogEntry.objects.log_actions(
            user_id=request.user.pk,
            queryset=list(users),
            action_flag=CHANGE,
            change_message=message,
        )

    def log_addition(self, request, obj, message):
        return self._log_on_users(request, [obj.user], "Created an API token.")[0]

    def log_change(self, request, obj, message):
        return self._log_on_users(request, [obj.user], "Changed the API token.")[0]

    def log_deletions(self, request, queryset):
        return self._log_on_users(
            request, [token.user for token in queryset], "Deleted the API token."
        )
