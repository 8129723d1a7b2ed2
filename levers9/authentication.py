"""The API's authentication: DRF's token authentication with wrong tokens throttled per address,
and DRF's session authentication with the same CSRF rule as the pages.

Its own module because DRF imports the authentication classes while `rest_framework.views`
is still loading: a module that imports DRF's views (as levers9.api does) cannot hold them.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions

from levers9.middleware import SameOriginCsrfMiddleware
from levers9.throttles import token_failure_record, token_refusal


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's, with wrong tokens counted per address as failed sign-ins are: past the allowance,
    every token from that address is refused with a 429 and Retry-After, before it is looked
    up, the right one included (so the answer tells a guesser nothing), until the oldest
    failure ages out. A request with no token is not a guess and is never refused here."""

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        refusal = token_refusal(request)
        if refusal is not None:
            # levers9.api's handler words the 429 from the refusal kept on the request.
            raise exceptions.Throttled(wait=refusal.wait_s)
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            token_failure_record(request)
            raise


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
