"""An id past what the database holds (a bigint: at most 2**63 - 1) in an address or a JSON body
is a 400 that names the field, never a 404 that says "not found" of a thing that cannot exist."""

from __future__ import annotations

import pytest

TWENTY_DIGITS = "9" * 20
BIGINT_MAX = 2**63 - 1


def test_a_pair_id_past_the_range_in_the_address_is_a_400(reviewer_client):
    response = reviewer_client.post(f"/api/rl/duel/{TWENTY_DIGITS}/skip/")
    assert response.status_code == 400, response.content
    assert "id" in response.json()
    assert str(BIGINT_MAX) in response.json()["id"][0]


def test_a_pair_id_past_the_range_in_the_body_is_a_400(reviewer_client):
    response = reviewer_client.post(
        "/api/rl/picks/",
        f'{{"pair": {TWENTY_DIGITS}, "chosen": "A"}}',
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "pair" in response.json()


def test_a_number_deep_in_a_body_is_named_by_its_path(owner_client):
    response = owner_client.post(
        "/api/rl/engines/runs/",
        f'{{"algorithm": "ppo", "pack": "lettings", "knobs": {{"seed": [1, -{TWENTY_DIGITS}]}}}}',
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "knobs.seed[1]" in response.json()


@pytest.mark.parametrize(
    ("method", "path"), [("get", "/api/rl/calls/{}/"), ("post", "/api/rl/policies/{}/release")]
)
def test_an_api_id_past_the_range_is_a_400(owner_client, method, path):
    response = getattr(owner_client, method)(path.format(TWENTY_DIGITS))
    assert response.status_code == 400, response.content
    assert "id" in response.json()


def test_a_page_id_past_the_range_is_a_400_page_naming_it(owner_client):
    response = owner_client.get(f"/calls/{TWENTY_DIGITS}/")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"call_id" in response.content


def test_the_largest_id_is_still_only_not_found(owner_client, reviewer_client):
    assert owner_client.get(f"/calls/{BIGINT_MAX}/").status_code == 404
    assert owner_client.get(f"/api/rl/calls/{BIGINT_MAX}/").status_code == 404
    assert reviewer_client.post(f"/api/rl/duel/{BIGINT_MAX}/skip/").status_code == 404


def test_a_slug_of_digits_is_no_id(owner_client):
    # A world's address is text: twenty digits are a slug no world has, not a number.
    assert owner_client.get(f"/api/rl/packs/{TWENTY_DIGITS}/").status_code == 404


def test_a_live_calls_own_id_of_digits_is_text(owner_client):
    # A business's own call id: text, however many digits, so not refused as a number.
    response = owner_client.post(
        f"/api/rl/live/calls/{TWENTY_DIGITS}/outcome/",
        {"outcome": "won"},
        content_type="application/json",
    )
    assert response.status_code != 400 or "call_id" not in response.json(), response.content
