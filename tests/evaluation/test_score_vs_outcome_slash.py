"""The lens's address is named without a trailing slash (packs/<pack>/score-vs-outcome); with
one it answered 404, because the API's slash tolerance only ever added a slash."""

from __future__ import annotations


def test_it_answers_with_the_slash_as_without_it(owner_client):
    without = owner_client.get("/api/rl/packs/lettings/score-vs-outcome")
    with_slash = owner_client.get("/api/rl/packs/lettings/score-vs-outcome/")
    assert without.status_code != 404
    assert with_slash.status_code == without.status_code
    assert with_slash.json() == without.json()


def test_a_slashed_path_that_exists_neither_way_is_still_a_404(owner_client):
    assert owner_client.get("/api/rl/packs/lettings/no-such-lens/").status_code == 404


def test_another_workspace_is_refused_with_the_slash_too(outsider_client):
    for url in (
        "/api/rl/packs/lettings/score-vs-outcome",
        "/api/rl/packs/lettings/score-vs-outcome/",
    ):
        response = outsider_client.get(url)
        assert response.status_code in {401, 403}
        assert "bands" not in response.json()
