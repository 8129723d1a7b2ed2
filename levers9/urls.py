"""URLs of a workspace (tenant) host: pages, the API under /api/rl/, the workspace admin."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from arena.api import CallViewSet, WorldViewSet
from levers9 import api, views
from policies.api import PolicyVersionViewSet
from training.api import JobViewSet, train_move_strategy_api

api.router.register("packs", WorldViewSet, basename="pack")
api.router.register("calls", CallViewSet, basename="call")
api.router.register("policies", PolicyVersionViewSet, basename="policy")
api.router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("training.urls")),
    path("", include("arena.urls")),
    path("admin/", admin.site.urls),
    path("api/rl/me/", api.me, name="api-me"),
    path("api/rl/train/move-strategy/", train_move_strategy_api, name="api-train-move-strategy"),
    path("api/rl/", include(api.router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
