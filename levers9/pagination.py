"""The API's one pagination: bounded `limit` and `offset` on every list.

Its own module, importing only DRF's pagination: DRF loads the pagination class while it builds
its generic views, so the class cannot live beside the router (a circular import)."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination


class ListPagination(LimitOffsetPagination):
    """Every list: `limit` (PAGE_SIZE by default, at most 500) and `offset` (at most 10**9).

    Out of range is a 400 naming the parameter: PostgreSQL's LIMIT and OFFSET are 64-bit, so
    an unbounded number would otherwise reach the database and fail there (a 500)."""

    max_limit = 500
    max_offset = 10**9
    limit_query_description = f"Rows per page (at most {max_limit})"
    offset_query_description = f"Rows to skip (at most {max_offset})"

    def get_limit(self, request):
        self._refuse_past(request, self.limit_query_param, self.max_limit)
        return super().get_limit(request)

    def get_offset(self, request):
        self._refuse_past(request, self.offset_query_param, self.max_offset)
        return super().get_offset(request)

    @staticmethod
    def _refuse_past(request, name: str, maximum: int) -> None:
        # Not a number: DRF's own fallback (the default) stands, as it always has.
        try:
            value = int(request.query_params.get(name, ""))
        except ValueError:
            return
        if value > maximum:
            raise ValidationError({name: [f"{name} must be at most {maximum}."]})
