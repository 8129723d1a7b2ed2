"""Pages of the policy registry, and the API's actions at the addresses the description names
without a trailing slash. Included before the arena's placeholders of the same paths."""

from __future__ import annotations

from django.urls import path, re_path

from policies import views
from policies.api import PolicyVersionActionsWithoutSlash


def _action_without_slash(name: str):
    # As the router does it: the action's own options (its permission classes above all)
    # must reach the view, or it would run with the viewset's reviewer-level permission.
    action = getattr(PolicyVersionActionsWithoutSlash, name)
    return PolicyVersionActionsWithoutSlash.as_view(
        {"post": name}, detail=True, basename="policy", **action.kwargs
    )


urlpatterns = [
    path("policies/", views.policies_page, name="policies"),
    path("policies/<int:version_id>/runs-on/", views.version_runs_on, name="version-runs-on"),
    path("policies/<int:version_id>/release/", views.version_release_view, name="version-release"),
    path("policies/<int:version_id>/serve/", views.version_serve_view, name="version-serve"),
    path("environment/", views.environment_page, name="environment"),
    path("environment/<slug:slug>/judge/", views.world_judge, name="world-judge"),
    path("endpoints/", views.endpoints_page, name="endpoints"),
    path(
        "endpoints/<int:endpoint_id>/release/",
        views.endpoint_release_view,
        name="endpoint-release",
    ),
    re_path(
        r"^api/rl/policies/(?P<pk>[0-9]+)/release$",
        _action_without_slash("release"),
    ),
    re_path(
        r"^api/rl/policies/(?P<pk>[0-9]+)/serve$",
        _action_without_slash("serve"),
    ),
    re_path(
        r"^api/rl/policies/(?P<pk>[0-9]+)/runs-on$",
        _action_without_slash("runs_on"),
    ),
]
