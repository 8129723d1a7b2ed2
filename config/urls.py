"""URLs of a workspace (tenant) host: pages, the API under /api/rl/, the workspace admin.

Every app's pages and API viewsets are put together here, above the apps, so that the
platform's router (levers9.api) names none of them."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from arena.api import (
    CallViewSet,
    DuelViewSet,
    JudgeOverrideViewSet,
    PickViewSet,
    PreferenceVersionViewSet,
    WorldViewSet,
)
from evaluation.api import EvaluationViewSet
from levers9 import api, views
from levers9.jobs.api import JobViewSet
from levers9.users.api import InvitationViewSet, UserViewSet
from policies.api import EndpointViewSet, PolicyVersionViewSet
from training.api import (
    engines_run_api,
    engines_run_promote_api,
    train_move_strategy_api,
    train_wording_api,
)

api.router.register("packs", WorldViewSet, basename="pack")
api.router.register("calls", CallViewSet, basename="call")
api.router.register("policies", PolicyVersionViewSet, basename="policy")
api.router.register("endpoints", EndpointViewSet, basename="endpoint")
api.router.register("duel", DuelViewSet, basename="duel")
api.router.register("picks", PickViewSet, basename="pick")
api.router.register("overrides", JudgeOverrideViewSet, basename="override")
api.router.register("preferences", PreferenceVersionViewSet, basename="preference-version")
api.router.register("jobs", JobViewSet, basename="job")
api.router.register("users", UserViewSet, basename="user")
api.router.register("invitations", InvitationViewSet, basename="invitation")
api.router.register("evaluations", EvaluationViewSet, basename="evaluation")

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("training.urls")),
    path("", include("policies.urls")),
    path("", include("evaluation.urls")),
    path("", include("arena.urls")),
    path("", include("levers9.users.urls")),
    path("admin/", admin.site.urls),
    path("api/rl/me/", api.me, name="api-me"),
    path("api/rl/train/move-strategy/", train_move_strategy_api, name="api-train-move-strategy"),
    path("api/rl/train/wording/", train_wording_api, name="api-train-wording"),
    path("api/rl/engines/runs/", engines_run_api, name="api-engines-run"),
    path(
        "api/rl/engines/runs/<int:job_id>/promote/",
        engines_run_promote_api,
        name="api-engines-run-promote",
    ),
    # In their own namespace ("api:job-detail"): the router names its routes
    # "<basename>-<action>", and a page named the same ("duel-generate", "call-detail",
    # "job-cancel") would otherwise reverse to the API's address, since the last pattern of a
    # name wins. A page's form then posted to the API and showed its JSON error as a page.
    path("api/rl/", include((api.router.urls, "api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
