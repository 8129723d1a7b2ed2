"""Pages: the owner's Users page (invite, change a role, remove, withdraw an invitation) and the
invitation link's page, where the invitee chooses a password and is signed in."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from levers9.roles import OWNER, ROLE_HELP, ROLES, role_required
from levers9.users import selectors, services
from levers9.users.models import Invitation

# The link's page is reached by a secret in its path: the browser must not pass that path to
# any other site as a Referer. "same-origin" rather than "no-referrer": with no referrer at
# all, browsers send `Origin: null` on the form's POST, and the CSRF check refuses it.
LINK_REFERRER_POLICY = "same-origin"


class InviteForm(forms.Form):
    email = forms.CharField(max_length=254)
    role = forms.CharField(max_length=20)


class ChoosePasswordForm(forms.Form):
    password1 = forms.CharField(strip=False, max_length=4096)
    password2 = forms.CharField(strip=False, max_length=4096)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("password1") != cleaned.get("password2"):
            self.add_error("password2", "The two passwords do not match: type the same twice.")
        return cleaned


def _page(request, *, invite_form: InviteForm | None = None, link: str = "", status: int = 200):
    context = {
        "page": "users",
        "users": selectors.workspace_users(),
        "removed_users": selectors.users_removed(),
        "invitations": selectors.invitations_pending(),
        "roles": [(role, ROLE_HELP[role]) for role in ROLES],
        "invite_form": invite_form or InviteForm(initial={"role": ROLES[0]}),
        "invitation_link": link,
        "lifetime_days": services.INVITATION_LIFETIME.days,
    }
    response = render(request, "levers9/users.html", context, status=status)
    if link:
        response["Cache-Control"] = "no-store"  # the link is shown once; no cache keeps it
    return response


def _errors_onto(form: forms.Form, error: ValidationError) -> None:
    for field, field_messages in error.message_dict.items():
        form.add_error(field if field in form.fields else None, field_messages)


@role_required(OWNER)
def users_page(request):
    return _page(request)


@require_POST
@role_required(OWNER)
def user_invite(request):
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _page(request, invite_form=form, status=400)
    try:
        invitation, token = services.invitation_create(
            email=form.cleaned_data["email"],
            role=form.cleaned_data["role"],
            invited_by=request.user,
        )
    except ValidationError as error:
        _errors_onto(form, error)
        return _page(request, invite_form=form, status=400)
    link = request.build_absolute_uri(reverse("invite-accept", args=[token]))
    messages.success(
        request,
        f"{invitation.email} is invited as {invitation.role}. No e-mail is sent: copy the link "
        "below and give it to them.",
    )
    return _page(request, link=link)


def _active_user(user_id: int):
    return get_object_or_404(get_user_model(), pk=user_id, is_active=True)


@require_POST
@role_required(OWNER)
def user_role_change(request, user_id: int):
    user = _active_user(user_id)
    try:
        services.user_role_change(user=user, role=request.POST.get("role", ""))
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"{user.get_username()} is now a {request.POST['role']}.")
    return redirect("users")


@require_POST
@role_required(OWNER)
def user_remove(request, user_id: int):
    user = _active_user(user_id)
    try:
        services.user_remove(user=user)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(
            request,
            f"{user.get_username()} is removed and can no longer sign in; their picks keep "
            "their name.",
        )
    return redirect("users")


@require_POST
@role_required(OWNER)
def invitation_revoke(request, invitation_id: int):
    invitation = get_object_or_404(Invitation, pk=invitation_id)
    services.invitation_revoke(invitation=invitation)
    messages.success(request, f"The invitation to {invitation.email} is withdrawn.")
    return redirect("users")


def _unusable(request, refusal: services.InvitationUnusable):
    response = render(
        request,
        "levers9/invitation_unusable.html",
        {"reason": str(refusal)},
        status=refusal.status,
    )
    response["Referrer-Policy"] = LINK_REFERRER_POLICY
    return response


def invite_accept(request, token: str):
    """The invitation link: no sign-in needed, the token is the permission."""
    try:
        invitation = services.invitation_usable(selectors.invitation_for_token(token))
    except services.InvitationUnusable as refusal:
        return _unusable(request, refusal)
    form = ChoosePasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = services.invitation_accept(token=token, password=form.cleaned_data["password1"])
        except ValidationError as error:
            form.add_error("password1", error.message_dict.get("password", error.messages))
        except services.InvitationUnusable as refusal:
            # Used or withdrawn between the page and the form (another tab, the owner).
            return _unusable(request, refusal)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(
                request, f"Welcome, {user.get_username()}: you are a {invitation.role} here."
            )
            return redirect("home")
    # A refused form is shown again with 200: a 4xx would put this still-working link in the
    # server's log of refused requests.
    response = render(
        request,
        "levers9/invitation_accept.html",
        {"invitation": invitation, "form": form, "role_help": ROLE_HELP[invitation.role]},
    )
    response["Referrer-Policy"] = LINK_REFERRER_POLICY
    response["Cache-Control"] = "no-store"
    return response
