"""A frozen version opens safely in a spreadsheet, and training still reads the exact text:
the TSV keeps every pick's bytes (its sha256 vouches for them), and the spreadsheet download
makes every cell that would start a formula inert."""

from __future__ import annotations

import csv
import io
import json

from arena import preference_format
from tests.conftest import client_for

FORMULA = '=HYPERLINK("http://evil","x")'
PAIR = {
    "id": "formula-1",
    "prompt": [{"role": "user", "content": "Is the flat still free?"}],
    "chosen": [{"role": "assistant", "content": "+44 20 7946 0000 is our number."}],
    "rejected": [{"role": "assistant", "content": "@everyone it is gone."}],
    "reviewer": FORMULA,
}


def _frozen(client) -> int:
    imported = client.post(
        "/api/rl/packs/lettings/preferences/import/",
        json.dumps(PAIR) + "\n",
        content_type="application/jsonl",
    )
    assert imported.status_code == 200, imported.content
    frozen = client.post("/api/rl/preferences/freeze/")
    assert frozen.status_code == 201, frozen.content
    return frozen.json()["number"]


def _body(response) -> str:
    return b"".join(response.streaming_content).decode()


def test_the_spreadsheet_download_makes_formula_cells_inert(owner_client):
    number = _frozen(owner_client)
    response = owner_client.get(f"/api/rl/preferences/{number}/download/?part=spreadsheet")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(_body(response))))
    header, row = rows[0], rows[-1]
    assert header == list(preference_format.COLUMNS)
    cells = dict(zip(header, row, strict=True))
    assert cells["reviewer"] == "'" + FORMULA
    assert cells["chosen"] == "'+44 20 7946 0000 is our number."
    assert cells["rejected"] == "'@everyone it is gone."
    # Nothing a spreadsheet would evaluate is left in any cell.
    assert not [cell for cell in row if cell.startswith(("=", "+", "-", "@"))]


def test_the_tsv_keeps_the_exact_text_that_training_reads(owner_client):
    number = _frozen(owner_client)
    response = owner_client.get(f"/api/rl/preferences/{number}/download/")
    assert response.status_code == 200
    text = _body(response)
    row = preference_format.parse_row(text.splitlines(keepends=True)[-1])
    assert (row.reviewer, row.chosen, row.rejected) == (
        FORMULA,
        PAIR["chosen"][0]["content"],
        PAIR["rejected"][0]["content"],
    )


def test_an_unknown_part_names_the_field(owner_client):
    number = _frozen(owner_client)
    response = owner_client.get(f"/api/rl/preferences/{number}/download/?part=xlsx")
    assert response.status_code == 400
    assert "spreadsheet" in response.json()["part"]


def test_another_workspace_cannot_download_it(owner_client, other_workspace):
    number = _frozen(owner_client)
    rival = client_for(other_workspace, "owner@rival.test")
    response = rival.get(
        f"/api/rl/preferences/{number}/download/?part=spreadsheet",
        HTTP_HOST="acme.localhost",
    )
    assert response.status_code in {401, 403}


def test_the_duel_page_links_the_spreadsheet_download(owner_client):
    number = _frozen(owner_client)
    page = owner_client.get("/duel/").content.decode()
    assert f"/api/rl/preferences/{number}/download/?pack=lettings&amp;part=spreadsheet" in page
