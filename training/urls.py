from __future__ import annotations

from django.urls import path

from training import views

urlpatterns = [
    path("engines/", views.engines, name="engines"),
    path("engines/runs/<int:job_id>/", views.engines_run, name="engines-run"),
    path(
        "engines/runs/<int:job_id>/promote/",
        views.engines_run_promote_view,
        name="engines-run-promote",
    ),
    path("train/", views.train, name="train"),
    path("train/move-strategy/", views.train_move_strategy_view, name="train-move-strategy"),
    path("train/wording/", views.train_wording_view, name="train-wording"),
    path("train/jobs/<int:job_id>/", views.job_detail, name="job-detail"),
    path(
        "train/jobs/<int:job_id>/cancel/",
        views.job_action,
        {"action": "cancel"},
        name="job-cancel",
    ),
    path(
        "train/jobs/<int:job_id>/resume/",
        views.job_action,
        {"action": "resume"},
        name="job-resume",
    ),
]
