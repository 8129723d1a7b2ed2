"""Every bench module imports. A bench runs only by hand, so nothing else notices when a move
elsewhere takes a name it imports (bench.reward_models asked bench.judge_agreement for the
data paths that levers9.shipped_data had taken over). Imported here with Django set up, as
pytest-django leaves it, which is how the Django benches find it once set up themselves."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
BENCH_MODULES = sorted(f"bench.{path.stem}" for path in BENCH.glob("*.py"))
# The project's own top-level packages: a missing name of theirs is a broken import, never an
# optional dependency that is not installed.
PROJECT_PACKAGES = {
    path.name for path in BENCH.parent.iterdir() if (path / "__init__.py").is_file()
} | {"bench"}


def test_it_finds_the_benches():
    assert {"bench.judge_agreement", "bench.reward_models"} <= set(BENCH_MODULES)


@pytest.mark.parametrize("module", BENCH_MODULES)
def test_the_bench_imports(module):
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing and missing not in PROJECT_PACKAGES:
            pytest.skip(f"{module} needs {missing}, which is not installed here")
        pytest.fail(f"{module} does not import: {error}")
    except ImportError as error:
        pytest.fail(f"{module} does not import: {error}")
