"""A clone is whole: no tracked file reads a path outside the repository.

The demo, the tests and the benchmarks once read their real data from `../shared/data/`, a
folder that happened to lie beside the checkout on the team's machines and in CI, and that a
stranger's clone lacks. The data now ships in `data/` (`levers9.shipped_data`). This check
looks at every tracked text file for the ways a path leaves the repository: a literal
`../shared` or `/work/...` path, `BASE_DIR.parent`, and `Path(__file__)` climbed (by
`.parent` or `.parents[k]`) above the repository's root, directly or through a name bound to
the root (`REPO.parent`).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from levers9.shipped_data import DATA_DIR, HH_RLHF_PAIRS, PERSUASION_CALLS

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".sh", ".html", ".yml", ".yaml"}
TEXT_NAMES = {"Makefile", "run"}
# The folders that hold data, not code: their READMEs cite the sources' own addresses.
NOT_CODE = {"data"}

LITERAL_OUTSIDE = re.compile(
    r"(?<![\w.])\.\./(?:shared|\.library)\b"  # a sibling folder of the checkout
    r"|(?<![\w.])/work/"  # this team's absolute checkout path
    r"|\bBASE_DIR\)?\.parent\b"  # the settings' root, climbed
)
CLIMB = re.compile(
    r"Path\(__file__\)(?:\.resolve\(\)|\.absolute\(\))?"
    r"(?P<chain>(?:\.parent\b)+|\.parents\[(?P<index>\d+)\])"
)
BOUND_TO_ROOT = r"^(?P<name>[A-Z_]+)\s*=\s*{climb}[ \t]*$"


def _levels(match: re.Match[str]) -> int:
    """How many folders above the file's own folder the climb ends (parents[0] is 0)."""
    if match.group("index") is not None:
        return int(match.group("index"))
    return match.group("chain").count(".parent") - 1


def paths_outside(text: str, depth: int) -> list[str]:
    """What in `text`, a file `depth` folders below the root, reaches outside the root."""
    found = [match.group(0) for match in LITERAL_OUTSIDE.finditer(text)]
    for match in CLIMB.finditer(text):
        if _levels(match) > depth:
            found.append(match.group(0))
    # A name bound to the root itself (REPO = Path(__file__).resolve().parents[2]), climbed.
    for match in re.finditer(BOUND_TO_ROOT.format(climb=CLIMB.pattern), text, flags=re.M):
        climb = CLIMB.search(match.group(0))
        if climb is not None and _levels(climb) == depth:
            name = re.escape(match.group("name"))
            found += re.findall(rf"\b{name}\)?\.parents?\b", text)
    return found


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {listed.stderr.strip()}")
    files = [ROOT / name for name in listed.stdout.split("\0") if name]
    return [
        path
        for path in files
        if (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES)
        and path.relative_to(ROOT).parts[0] not in NOT_CODE
        and path.is_file()
        and path != Path(__file__).resolve()  # its own examples are the ways out it looks for
    ]


def test_no_tracked_file_reads_a_path_outside_the_repository():
    files = _tracked_text_files()
    assert len(files) > 100, "the listing found too few files to mean anything"
    offences = []
    for path in files:
        relative = path.relative_to(ROOT)
        depth = len(relative.parts) - 1
        for text in paths_outside(path.read_text(encoding="utf-8", errors="replace"), depth):
            offences.append(f"{relative}: {text}")
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ('CALLS = Path("/work/shared/data/real-calls/x/calls.jsonl")', 1),
        ("The real calls in `../shared/data/real-calls/` are from ...", 0),
        ('FILE = settings.BASE_DIR.parent / "shared" / "data"', 2),
        ('FILE = Path(settings.BASE_DIR).parent / "shared/data"', 2),
        ('FILE = Path(__file__).resolve().parents[2] / "shared/data"', 1),
        ('FILE = Path(__file__).resolve().parent.parent.parent / "shared"', 1),
        ('REPO = Path(__file__).resolve().parents[2]\nFILE = REPO.parent / "shared"', 2),
    ],
)
def test_the_check_sees_each_way_out(text, depth):
    assert paths_outside(text, depth) != []


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ('ROOT = Path(__file__).resolve().parents[1] / "var"', 1),
        ("BASE_DIR = Path(__file__).resolve().parent.parent", 1),
        ('REPO = Path(__file__).resolve().parents[2]\nFILE = REPO / "data"', 2),
        ('HERE = Path(__file__).resolve().parents[2]\nUP = HERE.parent / "x"', 3),
        ('TRAINERS = Path(__file__).resolve().parents[2] / "trainers"\nUP = TRAINERS.parent', 2),
        ("see `../sibling.md` beside this one; path/to/../x", 0),
    ],
)
def test_the_check_lets_paths_inside_the_repository_pass(text, depth):
    assert paths_outside(text, depth) == []


def test_the_shipped_data_is_in_the_repository_with_its_licences():
    assert DATA_DIR == ROOT / "data"
    assert sum(1 for line in PERSUASION_CALLS.read_text().splitlines() if line.strip()) == 1017
    assert sum(1 for line in HH_RLHF_PAIRS.read_text().splitlines() if line.strip()) == 1150
    for folder in (PERSUASION_CALLS.parent, HH_RLHF_PAIRS.parent):
        assert (folder / "LICENSE").is_file()
        assert "Source:" in (folder / "README.md").read_text()


@pytest.mark.django_db
def test_the_demo_refuses_to_be_made_without_its_calls(tmp_path, monkeypatch):
    from levers9.models import Workspace

    missing = tmp_path / "nowhere" / "calls.jsonl"
    monkeypatch.setitem(os.environ, "LEVERS9_DEMO_CALLS", str(missing))
    with pytest.raises(CommandError, match=re.escape(str(missing))):
        call_command("demo_setup")
    assert not Workspace.objects.filter(slug="demo").exists()
