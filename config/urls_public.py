"""URLs of the public host (localhost): the operators' admin and a pointer to workspaces."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from levers9 import views

urlpatterns = [
    path("", views.public_index, name="public-index"),
    path("admin/", admin.site.urls),
]
