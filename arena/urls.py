"""Pages of the arena: the Duel, its freeze, real calls, and Environment → Judge."""

from __future__ import annotations

from django.urls import path

from arena import views

urlpatterns = [
    path("duel/", views.duel, name="duel"),
    path("duel/freeze/", views.duel_freeze, name="duel-freeze"),
    path("duel/generate/", views.duel_generate, name="duel-generate"),
    path("duel/panel/", views.duel_panel, name="duel-panel"),
    path("picks/", views.picks_page, name="picks"),
    path("world/", views.world_page, name="world"),
    path("world/new/", views.world_new, name="world-new"),
    path("world/<slug:slug>/", views.world_settings_save, name="world-save"),
    path("world/<slug:slug>/rubric/", views.world_rubric_save, name="world-rubric-save"),
    path("environment/", views.environment_page, name="environment"),
    path("environment/<slug:slug>/fit/", views.world_judge_fit, name="world-judge-fit"),
    path("environment/<slug:slug>/measure/", views.world_judge_measure, name="world-judge-measure"),
    path("calls/", views.call_list, name="calls"),
    path("calls/<int:call_id>/", views.call_detail, name="call-detail"),
]
