"""Pages of the platform: the workspace home (the four missions), sign-in and the public index."""

from __future__ import annotations

import math

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from levers9.models import Workspace
from levers9.throttles import login_refusal


@login_required
def home(request):
    from levers9.game import home_context

    # The missions and the rest of the page are the apps' (levers9.game).
    return render(request, "home.html", home_context())


def public_index(request):
    """The public host's front page. Which workspaces exist is the operators' to know: the list
    is shown to a signed-in platform operator only, never to an anonymous visitor."""
    operator = request.user.is_authenticated and request.user.is_staff
    workspaces = (
        Workspace.objects.exclude(schema_name="public").prefetch_related("domains")
        if operator
        else Workspace.objects.none()
    )
    return render(request, "public_index.html", {"workspaces": workspaces, "operator": operator})


class LoginView(auth_views.LoginView):
    """Django's sign-in page, refusing with a 429 (Retry-After, and the reason on the page)
    while the account or the address has too many recent failed sign-ins (levers9.throttles;
    its backend refuses the same attempts on the admin's sign-in too)."""

    def post(self, request, *args, **kwargs):
        refusal = login_refusal(request, request.POST.get("username", ""))
        if refusal is None:
            return super().post(request, *args, **kwargs)
        # Unbound: binding it would check the password, which is what is refused.
        form = self.get_form_class()(request, initial={"username": request.POST.get("username")})
        context = self.get_context_data(form=form, refused=refusal.sentence())
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(math.ceil(refusal.wait_s))
        return response
