"""Serve a trained version: the worker side of a serve job.

    python -m trainers.serving.local --spec spec.json --out result.json

Three engines, chosen by the dashboard from the pool (policies.endpoints):
  * vllm          a GPU pool: vLLM serves the merged weights on the version's cards
                  (--tensor-parallel-size N), with --enable-lora where an adapter is served;
  * vllm-cpu      a machine with no GPU where the `vllm-cpu` distribution is installed: the
                  same server on the CPU (its `vllm` command does not work; docs/architecture.md),
                  with a KV cache of a bounded size;
  * transformers  the embedded default: the dashboard generates in-process, so this job only
                  checks that the weights are there and load.

vLLM runs in an environment of its own, never the project's: vllm-cpu pins transformers below
the project's (`make vllm-env` builds `.venv-vllm`). The server is started with that
environment's interpreter: LEVERS9_VLLM_PYTHON where it is set, else `.venv-vllm/bin/python`
beside this checkout where it exists, else this process's own (a worker whose environment has
vllm itself, as on a GPU node).

For the two vLLM engines the server is started in its own session (so it outlives this job
and the job's cancellation of its own process group), its output goes to a log file, and
this process returns as soon as the server answers on /v1/models: the endpoint is then
serving and holds the job's cards until it is released.

Pure Python: never imports Django. Returns plain values only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from trainers.runtime import Progress, silent_progress, trainer_main

ENGINES = ("vllm", "vllm-cpu", "transformers")
VLLM_ENTRYPOINT = "vllm.entrypoints.openai.api_server"
VLLM_PYTHON_ENV = "LEVERS9_VLLM_PYTHON"
VLLM_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm"
"""The vllm-cpu environment `make vllm-env` builds beside this checkout."""
CPU_KV_CACHE_GIB = 2.0
"""vllm-cpu's KV cache unless the spec says otherwise. Left to itself it reserves 90% of the
machine's memory, and refuses to start when other processes already hold more than a tenth."""


@dataclass(frozen=True)
class ServeConfig:
    """What one serve job starts."""

    engine: str  # vllm | vllm-cpu | transformers
    weights_dir: str  # the merged weights, or the base when an adapter is served
    served_model_name: str  # what clients ask for (the adapter's name when there is one)
    gpu_count: int = 1  # cards for tensor parallelism (vllm only)
    adapter_dir: str = ""  # a LoRA adapter to serve on top of the weights, if any
    host: str = "0.0.0.0"  # noqa: S104 - the server must be reachable from the dashboard
    port: int = 0  # 0: a free port on this machine
    advertise_host: str = ""  # how the dashboard reaches this machine (else LEVERS9_SERVE_HOST)
    ready_timeout: float = 900.0  # seconds for the server to load and answer
    log_path: str = ""  # where the server's output goes
    max_lora_rank: int = 64  # vLLM refuses adapters of a higher rank than this
    max_model_len: int = 0  # 0: the model's own
    kv_cache_gib: float = 0.0  # vllm-cpu's KV cache; 0: CPU_KV_CACHE_GIB (vllm: its own)
    extra_args: tuple[str, ...] = field(default_factory=tuple)  # more vLLM flags, verbatim

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> ServeConfig:
        engine = str(spec.get("engine", ""))
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        gpu_count = int(spec.get("gpu_count", 1))
        if gpu_count < 1:
            raise ValueError("gpu_count must be at least 1")
        return cls(
            engine=engine,
            weights_dir=str(spec["weights_dir"]),
            served_model_name=str(spec["served_model_name"]),
            gpu_count=gpu_count,
            adapter_dir=str(spec.get("adapter_dir") or ""),
            host=str(spec.get("host") or "0.0.0.0"),  # noqa: S104 - as above
            port=int(spec.get("port") or 0),
            advertise_host=str(spec.get("advertise_host") or ""),
            ready_timeout=float(spec.get("ready_timeout") or 900.0),
            log_path=str(spec.get("log_path") or ""),
            max_lora_rank=int(spec.get("max_lora_rank") or 64),
            max_model_len=int(spec.get("max_model_len") or 0),
            kv_cache_gib=float(spec.get("kv_cache_gib") or 0.0),
            extra_args=tuple(str(arg) for arg in spec.get("extra_args") or ()),
        )

    @property
    def base_model_name(self) -> str:
        """With an adapter, the bare base gets a name of its own; clients ask for the adapter."""
        return f"{self.served_model_name}-base" if self.adapter_dir else self.served_model_name


# --- the command line ---------------------------------------------------------------------


def vllm_python() -> str:
    """The interpreter that runs vLLM: LEVERS9_VLLM_PYTHON, else the vllm-cpu environment
    beside this checkout, else this process's own."""
    configured = os.environ.get(VLLM_PYTHON_ENV, "").strip()
    if configured:
        return configured
    venv_python = VLLM_VENV / "bin" / "python"
    return str(venv_python) if venv_python.is_file() else sys.executable


def vllm_importable(python: str) -> bool:
    """Whether `python` has vllm (looked up, not imported: importing it takes seconds)."""
    if python == sys.executable:
        return find_spec("vllm") is not None
    if not Path(python).is_file():
        return False
    lookup = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        # The interpreter the operator named (or the one beside this checkout); no shell.
        finished = subprocess.run(  # noqa: S603
            [python, "-c", lookup], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return finished.returncode == 0


def vllm_command(config: ServeConfig, *, port: int, python: str = "") -> list[str]:
    """The vLLM OpenAI-compatible server for `config`, as an argument list, run by `python`
    (default: `vllm_python()`).

    `python -m vllm.entrypoints.openai.api_server` works for both distributions (`vllm` on
    GPUs, `vllm-cpu`, whose `vllm` command fails).
    """
    if config.engine not in ("vllm", "vllm-cpu"):
        raise ValueError(f"{config.engine} is not served by vLLM")
    command = [
        python or vllm_python(),
        "-m",
        VLLM_ENTRYPOINT,
        "--model",
        config.weights_dir,
        "--served-model-name",
        config.base_model_name,
        "--host",
        config.host,
        "--port",
        str(port),
    ]
    if config.engine == "vllm":
        # One copy of the weights split across the version's cards.
        command += ["--tensor-parallel-size", str(config.gpu_count)]
    else:
        kv_cache_bytes = int((config.kv_cache_gib or CPU_KV_CACHE_GIB) * 2**30)
        command += ["--kv-cache-memory-bytes", str(kv_cache_bytes)]
    if config.max_model_len:
        command += ["--max-model-len", str(config.max_model_len)]
    if config.adapter_dir:
        command += [
            "--enable-lora",
            "--lora-modules",
            f"{config.served_model_name}={config.adapter_dir}",
            "--max-lora-rank",
            str(config.max_lora_rank),
        ]
    return [*command, *config.extra_args]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- serving ---------------------------------------------------------------------------------


def _answers(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback http
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _log_tail(path: Path, size: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


def _stop_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _serve_vllm(config: ServeConfig, progress: Progress) -> dict[str, Any]:
    port = config.port or free_port()
    command = vllm_command(config, port=port)
    log_path = Path(config.log_path or Path(config.weights_dir) / f"serve-{port}.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - our interpreter, vLLM's module, our flags
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this job; released by the endpoint's stop
        )

    # Cancelling the job stops this process: take the half-started server down with it.
    def stop(signum, frame):  # pragma: no cover - exercised by a real cancel
        _stop_group(process)
        sys.exit(1)

    signal.signal(signal.SIGTERM, stop)
    started = time.monotonic()
    total = max(1, int(config.ready_timeout))
    while not _answers(port):
        if process.poll() is not None:
            raise RuntimeError(
                f"vLLM exited with code {process.returncode} before answering; "
                f"the end of its log ({log_path}):\n{_log_tail(log_path)}"
            )
        waited = time.monotonic() - started
        if waited > config.ready_timeout:
            _stop_group(process)
            raise RuntimeError(
                f"vLLM did not answer within {config.ready_timeout:g} s; the end of its log "
                f"({log_path}):\n{_log_tail(log_path)}"
            )
        progress(min(int(waited), total - 1), total, phase="loading")
        time.sleep(1.0)
    progress(total, total, phase="serving")
    # The name the dashboard reaches this worker by: LEVERS9_SERVE_HOST on the worker, else
    # the machine's own fully qualified name.
    advertise = config.advertise_host or os.environ.get("LEVERS9_SERVE_HOST") or socket.getfqdn()
    return {
        "engine": config.engine,
        "url": f"http://{advertise}:{port}/v1",
        "served_model": config.served_model_name,
        "pid": process.pid,
        "host": socket.gethostname(),
        "command": command,
        "log_path": str(log_path),
    }


def _check_in_process(config: ServeConfig, progress: Progress) -> dict[str, Any]:
    """The dashboard will generate in-process: make sure the weights are there and load."""
    weights = Path(config.weights_dir)
    if not (weights / "config.json").is_file():
        raise FileNotFoundError(f"No weights at {weights}: its config.json is missing.")
    if config.adapter_dir and not (Path(config.adapter_dir) / "adapter_config.json").is_file():
        raise FileNotFoundError(f"No adapter at {config.adapter_dir}.")
    progress(0, 1, phase="loading")
    from transformers import AutoConfig, AutoTokenizer

    AutoConfig.from_pretrained(str(weights))
    AutoTokenizer.from_pretrained(str(weights))
    progress(1, 1, phase="serving")
    return {
        "engine": config.engine,
        "url": "",
        "served_model": config.served_model_name,
        "pid": None,
        "host": socket.gethostname(),
        "command": [],
        "log_path": "",
    }


def run(spec: Mapping[str, Any], progress: Progress = silent_progress) -> dict[str, Any]:
    """Start serving what `spec` names; return where it answers (plain values)."""
    config = ServeConfig.from_spec(spec)
    if config.engine == "transformers":
        return _check_in_process(config, progress)
    return _serve_vllm(config, progress)


def main(argv: list[str] | None = None) -> int:
    return trainer_main(run, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
