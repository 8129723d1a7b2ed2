"""ASGI entry point: HTTP through Django (django-tenants routes it), websockets through ours."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "levers9.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from levers9.websocket import WorkspaceEventsConsumer, WorkspaceSocketMiddleware  # noqa: E402

websocket_urlpatterns = [
    path("ws/events/<str:topic>/", WorkspaceEventsConsumer.as_asgi()),
]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            WorkspaceSocketMiddleware(URLRouter(websocket_urlpatterns))
        ),
    }
)
