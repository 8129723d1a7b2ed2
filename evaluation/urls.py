"""Evaluate pages, and the lens at the address the description names (no trailing slash).
Included before the arena's placeholders, so evaluate/ is the real page."""

from __future__ import annotations

from django.urls import path

from evaluation import views
from evaluation.api import score_vs_outcome_api

urlpatterns = [
    path("evaluate/", views.evaluate, name="evaluate"),
    path("evaluate/<int:evaluation_id>/", views.evaluation_detail, name="evaluate-detail"),
    path(
        "evaluate/<int:evaluation_id>/calls/<int:position>/",
        views.evaluation_episode_view,
        name="evaluate-episode",
    ),
    path(
        "api/rl/packs/<slug:pack>/score-vs-outcome",
        score_vs_outcome_api,
        name="api-score-vs-outcome",
    ),
]
