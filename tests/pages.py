"""A page as the tests read it: fetched by a signed-in client, checked to answer 200, as text."""

from __future__ import annotations


def page_text(client, path: str, data=None) -> str:
    page = client.get(path, data)
    assert page.status_code == 200, (path, page.status_code)
    return page.content.decode()
