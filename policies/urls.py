"""Pages of the policy registry, and the API's actions at the addresses the description names
without a trailing slash. Included before the arena's placeholders of the same paths."""

from __future__ import annotations

from django.urls import path, re_path

from policies import api_live, views, views_live
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
    path(
        "policies/<int:version_id>/make-live/",
        views_live.version_make_live_view,
        name="version-make-live",
    ),
    path("release/", views_live.release_page, name="release"),
    path(
        "release/canary/start/", views_live.canary_action, {"action": "start"}, name="canary-start"
    ),
    path(
        "release/canary/promote/",
        views_live.canary_action,
        {"action": "promote"},
        name="canary-promote",
    ),
    path(
        "release/canary/roll-back/",
        views_live.canary_action,
        {"action": "roll-back"},
        name="canary-roll-back",
    ),
    path(
        "api/rl/policies/<int:version_id>/make-live/",
        api_live.version_make_live_api,
        name="api-make-live",
    ),
    path("api/rl/canary/", api_live.canary_api, name="api-canary"),
    path("api/rl/canary/start/", api_live.canary_start_api, name="api-canary-start"),
    path(
        "api/rl/canary/promote/",
        api_live.canary_end_api,
        {"action": "promote"},
        name="api-canary-promote",
    ),
    path(
        "api/rl/canary/roll-back/",
        api_live.canary_end_api,
        {"action": "roll-back"},
        name="api-canary-roll-back",
    ),
    path("api/rl/live/calls/", api_live.live_call_route_api, name="api-live-call-route"),
    path(
        "api/rl/live/calls/<str:call_id>/outcome/",
        api_live.live_call_outcome_api,
        name="api-live-call-outcome",
    ),
    path("policies/<int:version_id>/runs-on/", views.version_runs_on, name="version-runs-on"),
    path("policies/<int:version_id>/release/", views.version_release_view, name="version-release"),
    path("policies/<int:version_id>/serve/", views.version_serve_view, name="version-serve"),
    path("environment/<slug:slug>/judge/", views.world_judge, name="world-judge"),
    path(
        "policies/worlds/<slug:slug>/system-prompt/",
        views.world_system_prompt,
        name="world-system-prompt",
    ),
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
