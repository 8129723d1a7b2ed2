"""Pages of a workspace. Missions and steps that later work fills start as placeholders."""

from __future__ import annotations

from django.urls import path

from arena import views

urlpatterns = [
    path("duel/", views.duel, name="duel"),
    path("duel/freeze/", views.duel_freeze, name="duel-freeze"),
    path("duel/generate/", views.duel_generate, name="duel-generate"),
    path("train/", views.placeholder, {"page": "train"}, name="train"),
    path("evaluate/", views.placeholder, {"page": "evaluate"}, name="evaluate"),
    path("policies/", views.placeholder, {"page": "policies"}, name="policies"),
    path("environment/", views.placeholder, {"page": "environment"}, name="environment"),
    path("engines/", views.placeholder, {"page": "engines"}, name="engines"),
    path("endpoints/", views.placeholder, {"page": "endpoints"}, name="endpoints"),
    path("release/", views.placeholder, {"page": "release"}, name="release"),
    path("calls/", views.call_list, name="calls"),
    path("calls/<int:call_id>/", views.call_detail, name="call-detail"),
]
