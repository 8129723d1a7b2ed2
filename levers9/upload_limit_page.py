"""The admin's own page for a body over the upload limit.

levers9.middleware.UploadLimitMiddleware refuses such a body before anything reads it, and
before any view, so an upload in the admin got a bare-text 413. Under /admin/ the refusal is
this page instead: the admin's look, the limit and how to go on, and the way back to the form.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

TITLE = "File too large"


def admin_upload_too_large_page(request: HttpRequest, detail: str) -> HttpResponse | None:
    """The 413 as an admin page for a request under /admin/, else None (the caller answers).
    Made before the session and the user are read, so it shows no user's menu."""
    if not request.path.startswith("/admin/"):
        return None
    from django.contrib import admin

    context = {
        "title": TITLE,
        "detail": detail,
        "back": request.path,
        "site_header": admin.site.site_header,
        "site_title": admin.site.site_title,
        "has_permission": False,
        "is_nav_sidebar_enabled": False,
    }
    return render(request, "admin/upload_too_large.html", context, status=413)
