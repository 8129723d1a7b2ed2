"""The API's session authentication: DRF's, with the same CSRF rule as the pages.

Its own module because DRF imports the authentication classes while `rest_framework.views`
is still loading: a module that imports DRF's views (as levers9.api does) cannot hold them.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions

from levers9.middleware import SameOriginCsrfMiddleware


class _SameOriginCsrfCheck(SameOriginCsrfMiddleware):
    def _reject(self, request, reason):
        return reason  # DRF wants the reason, not a response (as its own CSRFCheck does)


class SessionAuthentication(authentication.SessionAuthentication):
    """A signed-in browser's write is accepted only from the workspace's own origin (DRF's
    own check would trust the wildcard origins Django's does)."""

    def enforce_csrf(self, request):
        check = _SameOriginCsrfCheck(lambda request: None)
        check.process_request(request)
        reason = check.process_view(request, None, (), {})
        if reason:
            raise exceptions.PermissionDenied(f"CSRF Failed: {reason}")
