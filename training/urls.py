from __future__ import annotations

from django.urls import path

from training import views

urlpatterns = [
    path("train/", views.train, name="train"),
    path("train/move-strategy/", views.train_move_strategy_view, name="train-move-strategy"),
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
