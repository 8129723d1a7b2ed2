"""Providers: who writes the words for a role that runs on a model (the agent, a model judge).

One interface (docs/architecture.md, Contracts → Provider):

    reply(messages, *, max_tokens) -> str        messages: [{"role", "content"}], OpenAI style
    available() -> (bool, reason)                the reason names what is missing

Implementations: the simulator (scripted words from a move strategy), any OpenAI-compatible
vLLM endpoint (base URL, model, optional LoRA adapter, optional key from a named environment
variable), OpenAI and Anthropic by model name (the real `openai` / `anthropic` clients), and
the in-process transformers generator that serves small trained versions on a machine with
no GPU.

Remote calls share one discipline: a per-endpoint concurrency limit (a semaphore), a timeout,
retries with backoff on 429 and 5xx (honouring Retry-After), and an error that says which
endpoint did not answer and why. The clients' own retries are off so that discipline is the
only one.

Keys stay on the pod: they are read from the environment at call time and go only into the
client's Authorization header. They are never stored, logged, or put into an error message
(every message is scrubbed of the values of the key variables before it leaves this module).
The pod's variables are shared by every workspace, so an endpoint may name only
VLLM_API_KEY (platform-wide: sent only to hosts an operator allowed) or a variable carrying its
own workspace's slug, LEVERS9_ENDPOINT_<SLUG>_<NAME>_KEY, checked when it is saved and again
when the key is read.

A typed address is called through levers9.outbound_transport: resolved, checked and connected
to at the checked address, so DNS cannot change the answer after the check.

Pure Python: no Django here, so the judge (trainers.judge.model_judge) and the agent
(policies.agents) share it. torch/transformers are imported inside functions only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from levers9.outbound import host_allowed, outbound_problem
from trainers.conversation import CALL_CONNECTS, CUSTOMER_WAITS, STAGE_DIRECTIONS
from trainers.moves.simulator import (
    DEFAULT_MAX_TURNS,
    Persona,
    describe_state,
    scripted_reply,
    state_index,
)
from trainers.moves.strategy import SCRIPTED, choose_move

logger = logging.getLogger(__name__)

Message = Mapping[str, str]

SIMULATOR, VLLM, OPENAI, ANTHROPIC, TRANSFORMERS = (
    "simulator",
    "vllm",
    "openai",
    "anthropic",
    "transformers",
)
OPENAI_KEY_ENV = "OPENAI_API_KEY"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
HOSTED_KEY_ENVS = {OPENAI: OPENAI_KEY_ENV, ANTHROPIC: ANTHROPIC_KEY_ENV}
# vLLM serves without a key unless started with --api-key; the client insists on something.
NO_KEY = "EMPTY"
DEFAULT_MAX_TOKENS = 160

# The variable an endpoint's key is read from may only be one meant for endpoints: a typed
# URL must never be handed the pod's database password, Django secret, or the OpenAI and
# Anthropic keys (which go to those companies only).
KEY_ENV_PATTERN = re.compile(r"^(?:VLLM|LEVERS9_ENDPOINT)_[A-Z0-9_]*(?:KEY|TOKEN)$")
PLATFORM_VLLM_KEY_ENV = "VLLM_API_KEY"
ENDPOINT_KEY_PREFIX = "LEVERS9_ENDPOINT_"
# The columns these are stored in (PolicyVersion, JudgeConnection): longer is a 400, not a
# database error.
MAX_ENDPOINT_URL_LENGTH = 200
MAX_KEY_ENV_LENGTH = 64


class ProviderError(RuntimeError):
    """The provider gave no usable reply. The message says which endpoint and why."""


class ProviderUnavailable(ProviderError):
    """Not usable here at all: a missing key variable, a missing package, missing weights."""


class ProviderTimeout(ProviderError):
    """The endpoint did not answer within its timeout."""


class ProviderBusy(ProviderError):
    """Every slot of the endpoint's concurrency limit stayed taken for the whole timeout."""


class ProviderRejected(ProviderError):
    """The endpoint refused the request (a 4xx other than 429): retrying will not help."""


@runtime_checkable
class Provider(Protocol):
    """What every provider offers."""

    label: str

    def available(self) -> tuple[bool, str]: ...

    def reply(
        self, messages: Sequence[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> str: ...


@dataclass(frozen=True)
class ModelTarget:
    """Where a model role is reached. Names and addresses only: never a key."""

    provider: str  # vllm | openai | anthropic | transformers
    model: str = ""  # the model name; for transformers, the weights folder
    base_url: str = ""  # vLLM (and tests pointing a hosted client at a stub)
    lora_adapter: str = ""  # vLLM: the adapter name to ask for; transformers: its folder
    api_key_env: str = ""  # vLLM: the NAME of the variable holding its key
    # The platform's own serving (an endpoint it started): not an address a user typed.
    trusted: bool = False


@dataclass(frozen=True)
class CallLimits:
    """How a remote endpoint is called."""

    timeout: float = 30.0  # seconds for one request (and for waiting on a free slot)
    concurrency: int = 4  # requests in flight at once, per endpoint, per process
    attempts: int = 3  # tries on 429 / 5xx / refused connections
    backoff: float = 0.5  # seconds before the second try; doubles each time
    max_backoff: float = 10.0  # never wait longer than this between tries

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> CallLimits:
        """LEVERS9_PROVIDER_TIMEOUT, _CONCURRENCY, _ATTEMPTS and _BACKOFF override the
        defaults."""
        environ = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            timeout=float(environ.get("LEVERS9_PROVIDER_TIMEOUT", defaults.timeout)),
            concurrency=int(environ.get("LEVERS9_PROVIDER_CONCURRENCY", defaults.concurrency)),
            attempts=max(1, int(environ.get("LEVERS9_PROVIDER_ATTEMPTS", defaults.attempts))),
            backoff=float(environ.get("LEVERS9_PROVIDER_BACKOFF", defaults.backoff)),
        )


# --- validation of what a person types ------------------------------------------------------


def base_url_problem(url: str) -> str:
    """Why `url` cannot be an endpoint's base URL ("" when it can). Reads the text only: no
    name is resolved and nothing is called."""
    if len(url) > MAX_ENDPOINT_URL_LENGTH:
        return (
            f"endpoint_url is {len(url)} characters long; the limit is {MAX_ENDPOINT_URL_LENGTH}."
        )
    example = "an http(s) address such as http://gpu-node:8000/v1"
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in url):
        # The parser drops some of these silently, and the database refuses a NUL outright.
        return "endpoint_url: an address holds no spaces or control characters."
    try:
        parsed = urlparse(url)
        # Reading the port is what finds 99999, -1 and the like.
        _port = parsed.port
        host = parsed.hostname
    except ValueError as error:
        return f"endpoint_url: '{url}' is not {example} ({str(error).lower()})."
    if parsed.scheme not in ("http", "https") or not host:
        return f"endpoint_url: '{url}' is not {example}."
    if parsed.username or parsed.password:
        return (
            "endpoint_url: put no user name or password in the address; name a key "
            "variable instead."
        )
    return ""


# --- key variables: one workspace's own, or the platform's -----------------------------------

# Which workspace is asking, and the slugs of all of them. The platform (levers9.apps) fills
# this in; outside a workspace (or with no Django) no workspace's key is readable.
WorkspaceScope = Callable[[], tuple[str, Sequence[str]]]


def _no_workspace() -> tuple[str, Sequence[str]]:
    return "", ()


_workspace_scope: WorkspaceScope = _no_workspace


def workspace_scope_register(lookup: WorkspaceScope) -> None:
    """Tell this module how to learn the workspace in view (levers9.apps does, at start)."""
    global _workspace_scope
    _workspace_scope = lookup


def workspace_key_prefix(slug: str) -> str:
    """How the key variables of workspace `slug` start: LEVERS9_ENDPOINT_<SLUG>_."""
    return f"{ENDPOINT_KEY_PREFIX}{slug.upper().replace('-', '_')}_"


def key_env_workspace(name: str, workspace_slugs: Sequence[str]) -> str:
    """The workspace whose key variable `name` is ("" for none): the one whose slug it carries;
    where slugs share a start (acme, acme-b), the longest, so LEVERS9_ENDPOINT_ACME_B_GPU_KEY
    is acme-b's and never acme's."""
    owners = [slug for slug in workspace_slugs if name.startswith(workspace_key_prefix(slug))]
    return max(owners, key=len, default="")


def key_env_problem(name: str) -> str:
    """Why `name` cannot name an endpoint's key variable in the workspace in view ("" when it
    can, or is blank)."""
    if not name:
        return ""
    if len(name) > MAX_KEY_ENV_LENGTH:
        return (
            f"api_key_env is {len(name)} characters long; the limit is {MAX_KEY_ENV_LENGTH}: "
            "type the variable's name, never the key itself."
        )
    if name == PLATFORM_VLLM_KEY_ENV:
        return ""
    if not (name.startswith(ENDPOINT_KEY_PREFIX) and KEY_ENV_PATTERN.match(name)):
        return (
            f"api_key_env: the key variable must be named {PLATFORM_VLLM_KEY_ENV} or "
            f"{ENDPOINT_KEY_PREFIX}<WORKSPACE>_<NAME>_KEY, <WORKSPACE> being this workspace's "
            "slug in capitals (capitals, digits, underscores); type its name, never the key "
            "itself."
        )
    # Asked only here: a pure caller naming the platform's key needs no workspace.
    workspace, slugs = _workspace_scope()
    if workspace and key_env_workspace(name, slugs) == workspace:
        return ""
    own = f"{workspace_key_prefix(workspace)}<NAME>_KEY" if workspace else "none outside one"
    return f"api_key_env: {name} is not this workspace's key variable; its own are named {own}."


# --- keys: read at call time, never kept, scrubbed from every message -----------------------


def _secret_values(environ: Mapping[str, str], extra_names: Sequence[str] = ()) -> list[str]:
    names = {OPENAI_KEY_ENV, ANTHROPIC_KEY_ENV, *extra_names}
    names.update(name for name in environ if KEY_ENV_PATTERN.match(name))
    return [environ[name] for name in names if len(environ.get(name, "")) >= 4]


def scrub(text: str, environ: Mapping[str, str] | None = None, extra_names=()) -> str:
    """`text` with every key value of the environment replaced, cut to a readable length."""
    environ = os.environ if environ is None else environ
    for secret in _secret_values(environ, extra_names):
        text = text.replace(secret, "[key]")
    return text if len(text) <= 400 else text[:400] + "…"


# --- per-endpoint concurrency ---------------------------------------------------------------

_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def _endpoint_slots(key: str, size: int) -> threading.BoundedSemaphore:
    """One semaphore per endpoint per process, sized by the first caller."""
    with _SEMAPHORES_LOCK:
        semaphore = _SEMAPHORES.get(key)
        if semaphore is None:
            semaphore = _SEMAPHORES[key] = threading.BoundedSemaphore(max(1, size))
        return semaphore


def _no_redirect_client(
    sdk_name: str, limits: CallLimits, *, environ: Mapping[str, str], trusted: bool
) -> Any:
    """The SDK's own HTTP client, told not to follow redirects; for a typed address, on the
    transport that connects only to the addresses it checked."""
    options: dict[str, Any] = {"follow_redirects": False, "timeout": limits.timeout}
    if not trusted:
        from levers9.outbound_transport import PinnedTransport

        options["transport"] = PinnedTransport(environ)
    if sdk_name == "anthropic":
        import anthropic

        return anthropic.DefaultHttpxClient(**options)
    import openai

    return openai.DefaultHttpxClient(**options)


# --- remote providers (vLLM, OpenAI, Anthropic) ---------------------------------------------

_CLIENTS: dict[tuple[str, str, float, str, bool], Any] = {}
_CLIENTS_LOCK = threading.Lock()


class _RemoteProvider:
    """Shared by the three remote providers: slots, timeout, retries, clear errors."""

    kind = ""
    sdk_name = ""  # "openai" or "anthropic": both clients raise the same error classes

    def __init__(
        self,
        target: ModelTarget,
        *,
        limits: CallLimits | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.target = target
        self.limits = limits or CallLimits()
        self._environ = os.environ if environ is None else environ

    # What each provider fills in.
    @property
    def label(self) -> str:
        raise NotImplementedError

    def _key_env(self) -> str:
        raise NotImplementedError

    def _call(self, client: Any, messages: Sequence[Message], max_tokens: int) -> str:
        raise NotImplementedError

    def _client_class(self) -> Any:
        raise NotImplementedError

    # Shared.
    @property
    def endpoint_key(self) -> str:
        return f"{self.kind}|{self.target.base_url}|{self.target.model}"

    def _api_key(self) -> str:
        name = self._key_env()
        return self._environ.get(name, "") if name else NO_KEY

    def available(self) -> tuple[bool, str]:
        if find_spec(self.sdk_name) is None:
            return False, f"the {self.sdk_name} package is not installed"
        if not self.target.model:
            return False, f"{self.label} names no model"
        name = self._key_env()
        if name and not self._environ.get(name):
            return False, f"set {name} on the dashboard pod"
        return True, ""

    def _client(self) -> Any:
        key = self._api_key()
        # The cache key holds a digest of the key, never the key.
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        cache_key = (
            self.kind,
            self.target.base_url,
            self.limits.timeout,
            digest,
            self.target.trusted,
        )
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(cache_key)
            if client is None:
                options: dict[str, Any] = {
                    "api_key": key,
                    "timeout": self.limits.timeout,
                    "max_retries": 0,  # ours below, the same for every provider
                }
                if self.target.base_url:
                    options["base_url"] = self.target.base_url
                    # A redirect could lead anywhere the address check never saw.
                    options["http_client"] = _no_redirect_client(
                        self.sdk_name,
                        self.limits,
                        environ=self._environ,
                        trusted=self.target.trusted,
                    )
                client = _CLIENTS[cache_key] = self._client_class()(**options)
            return client

    def _scrub(self, text: str) -> str:
        return scrub(text, self._environ, [self._key_env()] if self._key_env() else [])

    def reply(self, messages: Sequence[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS) -> str:
        usable, reason = self.available()
        if not usable:
            raise ProviderUnavailable(f"{self.label} cannot answer here: {reason}.")
        slots = _endpoint_slots(self.endpoint_key, self.limits.concurrency)
        if not slots.acquire(timeout=self.limits.timeout):
            raise ProviderBusy(
                f"{self.label} had no free slot for {self.limits.timeout:g} s "
                f"({self.limits.concurrency} requests in flight)."
            )
        try:
            return self._reply_with_retries(messages, max_tokens)
        finally:
            slots.release()

    def _reply_with_retries(self, messages: Sequence[Message], max_tokens: int) -> str:
        import importlib

        sdk = importlib.import_module(self.sdk_name)
        client = self._client()
        last_problem = ""
        for attempt in range(1, self.limits.attempts + 1):
            started = time.monotonic()
            try:
                text = self._call(client, messages, max_tokens)
            except sdk.APITimeoutError as error:
                # Not retried: a second wait of the same length rarely helps a page waiting.
                raise ProviderTimeout(
                    f"{self.label} did not answer within {self.limits.timeout:g} s."
                ) from error
            except sdk.APIConnectionError as error:
                refusal = _outbound_refusal(error)
                if refusal:
                    # The address turned out not to be a public one at connect time: asking
                    # again asks the same resolver.
                    raise ProviderRejected(f"{self.label} was not called: {refusal}") from None
                last_problem = f"nothing answers there ({type(error).__name__})"
                wait = self._backoff(attempt, None)
            except (sdk.RateLimitError, sdk.InternalServerError) as error:
                status = error.status_code
                last_problem = f"it answered {status}: {self._scrub(_error_text(error))}"
                wait = self._backoff(attempt, error.response)
            except sdk.APIStatusError as error:
                raise ProviderRejected(
                    f"{self.label} refused the request ({error.status_code}): "
                    f"{self._scrub(_error_text(error))}"
                ) from error
            else:
                if not text or not text.strip():
                    raise ProviderError(f"{self.label} answered with no text.")
                logger.info(
                    "%s answered in %.0f ms (try %d)",
                    self.label,
                    (time.monotonic() - started) * 1000,
                    attempt,
                )
                return text.strip()
            if attempt < self.limits.attempts:
                logger.warning("%s: %s; trying again in %.2f s", self.label, last_problem, wait)
                time.sleep(wait)
        raise ProviderError(
            f"{self.label} did not answer after {self.limits.attempts} tries: {last_problem}."
        )

    def _backoff(self, attempt: int, response: Any) -> float:
        wait = self.limits.backoff * (2 ** (attempt - 1))
        retry_after = getattr(response, "headers", {}).get("retry-after") if response else None
        if retry_after:
            # An HTTP date instead of seconds: keep our own backoff.
            with contextlib.suppress(ValueError):
                wait = max(wait, float(retry_after))
        # A little jitter so many callers do not come back at the same instant.
        wait *= 1 + random.uniform(0, 0.2)  # noqa: S311 - timing jitter, not security
        return min(wait, self.limits.max_backoff)


def _outbound_refusal(error: BaseException) -> str:
    """The connect-time refusal behind a client's connection error ("" for any other)."""
    from levers9.outbound_transport import OutboundConnectRefused

    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OutboundConnectRefused):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return ""


def _error_text(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(error, "message", "") or error)


class _OpenAIStyle(_RemoteProvider):
    sdk_name = "openai"

    def _client_class(self) -> Any:
        import openai

        return openai.OpenAI

    def _request_model(self) -> str:
        return self.target.model

    def _call(self, client: Any, messages: Sequence[Message], max_tokens: int) -> str:
        completion = client.chat.completions.create(
            model=self._request_model(),
            messages=[{"role": m["role"], "content": m["content"]} for m in messages],
            **self._token_limit(max_tokens),
        )
        if not completion.choices:
            return ""
        return completion.choices[0].message.content or ""

    def _token_limit(self, max_tokens: int) -> dict[str, int]:
        return {"max_tokens": max_tokens}


class VllmProvider(_OpenAIStyle):
    """Any OpenAI-compatible endpoint (vLLM): base URL, model, optional adapter and key."""

    kind = VLLM

    @property
    def label(self) -> str:
        return f"the vLLM endpoint {self.target.base_url} ({self._request_model()})"

    def _request_model(self) -> str:
        # vLLM serves a LoRA adapter under its own name: asking for it is asking for the
        # base with the adapter applied.
        return self.target.lora_adapter or self.target.model

    def _key_env(self) -> str:
        name = self.target.api_key_env
        if not name or self.target.trusted:
            return name
        # Checked again as the key is read: a name saved before keys were scoped to their
        # workspace, or another workspace's, is never read.
        if key_env_problem(name):
            return ""
        # A platform-wide key goes only to hosts an operator allowed.
        if name == PLATFORM_VLLM_KEY_ENV and not host_allowed(self.target.base_url, self._environ):
            return ""
        return name

    def available(self) -> tuple[bool, str]:
        problem = base_url_problem(self.target.base_url) or key_env_problem(self.target.api_key_env)
        if not problem and not self.target.trusted:
            problem = outbound_problem(self.target.base_url, self._environ)
        if problem:
            return False, problem
        return super().available()


class OpenAIProvider(_OpenAIStyle):
    """OpenAI by model name; the key is OPENAI_API_KEY on the pod."""

    kind = OPENAI

    @property
    def label(self) -> str:
        return f"OpenAI {self.target.model}"

    def _key_env(self) -> str:
        return OPENAI_KEY_ENV

    def _token_limit(self, max_tokens: int) -> dict[str, int]:
        return {"max_completion_tokens": max_tokens}


class AnthropicProvider(_RemoteProvider):
    """Anthropic by model name; the key is ANTHROPIC_API_KEY on the pod."""

    kind = ANTHROPIC
    sdk_name = "anthropic"

    @property
    def label(self) -> str:
        return f"Anthropic {self.target.model}"

    def _key_env(self) -> str:
        return ANTHROPIC_KEY_ENV

    def _client_class(self) -> Any:
        import anthropic

        return anthropic.Anthropic

    def _call(self, client: Any, messages: Sequence[Message], max_tokens: int) -> str:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        conversation = alternating_turns([m for m in messages if m["role"] != "system"])
        options: dict[str, Any] = {}
        if system:
            options["system"] = system
        answer = client.messages.create(
            model=self.target.model, max_tokens=max_tokens, messages=conversation, **options
        )
        return "".join(
            getattr(block, "text", "")
            for block in answer.content
            if getattr(block, "type", "") == "text"
        )


# The stage directions the one conversation builder writes (trainers.conversation).


def alternating_turns(messages: Sequence[Message]) -> list[dict[str, str]]:
    """User and assistant turns that alternate and start and end with the user's, as the
    Anthropic API (and most chat templates) require: consecutive turns of one side are
    joined; a conversation that starts or ends with the assistant gets a short stage
    direction from the user's side."""
    turns: list[dict[str, str]] = []
    for message in messages:
        role = "assistant" if message["role"] == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": turns[-1]["content"] + "\n" + message["content"]}
        else:
            turns.append({"role": role, "content": message["content"]})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": CALL_CONNECTS})
    if turns[-1]["role"] != "user":
        turns.append({"role": "user", "content": CUSTOMER_WAITS})
    return turns


# --- the in-process transformers generator ---------------------------------------------------

GENERATION_BATCH = 8
"""Replies one in-process generation answers at most."""


@dataclass
class _Asked:
    messages: Sequence[Message]
    max_tokens: int
    done: threading.Event
    text: str = ""
    error: BaseException | None = None


class _GenerationQueue:
    """The replies asked of one in-process model, answered in batches: whichever asking
    thread holds the model generates for every reply waiting then (up to GENERATION_BATCH),
    and each thread returns with its own. One asking thread alone gets a batch of one."""

    def __init__(self) -> None:
        self.waiting: list[_Asked] = []
        self.waiting_lock = threading.Lock()
        self.model_lock = threading.Lock()

    def ask(self, messages: Sequence[Message], max_tokens: int, generate: Any) -> str:
        asked = _Asked(messages, max_tokens, threading.Event())
        with self.waiting_lock:
            self.waiting.append(asked)
        while not asked.done.is_set():
            with self.model_lock:
                if asked.done.is_set():
                    break
                with self.waiting_lock:
                    batch = self.waiting[:GENERATION_BATCH]
                    del self.waiting[:GENERATION_BATCH]
                try:
                    texts = generate([(item.messages, item.max_tokens) for item in batch])
                    for item, text in zip(batch, texts, strict=True):
                        item.text = text
                except BaseException as error:  # noqa: BLE001 - each asker re-raises its own
                    for item in batch:
                        item.error = error
                finally:
                    for item in batch:
                        item.done.set()
        if asked.error is not None:
            raise asked.error
        return asked.text


_GENERATION_QUEUES: dict[str, _GenerationQueue] = {}


def _generation_queue(key: str) -> _GenerationQueue:
    with _SEMAPHORES_LOCK:
        return _GENERATION_QUEUES.setdefault(key, _GenerationQueue())


_LOCAL_MODELS: dict[tuple[str, str], tuple[Any, Any]] = {}
_LOCAL_LOCK = threading.Lock()


def local_models_forget(weights_dir: str | Path | None = None) -> None:
    """Drop loaded models from this process's cache (all, or one weights folder's)."""
    with _LOCAL_LOCK:
        for key in list(_LOCAL_MODELS):
            if weights_dir is None or key[0] == str(weights_dir):
                del _LOCAL_MODELS[key]


class TransformersProvider:
    """A small trained version generated in this process with transformers: the embedded
    default where no GPU exists. Loaded once per process and kept; one generation at a time
    per model (the CPU is the limit, not the network)."""

    kind = TRANSFORMERS

    def __init__(self, target: ModelTarget, *, limits: CallLimits | None = None) -> None:
        self.target = target
        self.limits = limits or CallLimits()

    @property
    def label(self) -> str:
        return f"the in-process model {Path(self.target.model).name}"

    def available(self) -> tuple[bool, str]:
        if find_spec("torch") is None or find_spec("transformers") is None:
            return False, "torch and transformers are not installed"
        if not (Path(self.target.model) / "config.json").is_file():
            return False, f"no weights at {self.target.model}"
        if self.target.lora_adapter and find_spec("peft") is None:
            return False, "the adapter needs the peft package"
        return True, ""

    def _load(self) -> tuple[Any, Any]:
        key = (self.target.model, self.target.lora_adapter)
        with _LOCAL_LOCK:
            loaded = _LOCAL_MODELS.get(key)
            if loaded is None:
                from transformers import AutoModelForCausalLM, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(self.target.model)
                model = AutoModelForCausalLM.from_pretrained(self.target.model)
                if self.target.lora_adapter:
                    from peft import PeftModel

                    model = PeftModel.from_pretrained(model, self.target.lora_adapter)
                model.eval()
                loaded = _LOCAL_MODELS[key] = (tokenizer, model)
            return loaded

    def reply(self, messages: Sequence[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS) -> str:
        usable, reason = self.available()
        if not usable:
            raise ProviderUnavailable(f"{self.label} cannot answer here: {reason}.")
        # One generation at a time per model and process, holding every reply asked by then.
        # Waiting is queueing for this machine's CPU, not a server that stopped answering,
        # and every generation ends (max_tokens bounds it): no timeout here, or an evaluation
        # asking several moments at once would record busy errors for replies merely queued.
        queue = _generation_queue(f"{self.kind}|{self.target.model}|{self.target.lora_adapter}")
        text = queue.ask(messages, max_tokens, self._generate)
        if not text:
            raise ProviderError(f"{self.label} generated no text.")
        return text

    def _generate(self, asked: Sequence[tuple[Sequence[Message], int]]) -> list[str]:
        """Greedy replies to several conversations in one batched generation (left-padded,
        with the KV cache): a small model on a CPU is bound by reading its weights, so four
        replies cost about what one does."""
        import torch

        tokenizer, model = self._load()
        prompts = [_prompt_text(tokenizer, messages) for messages, _max in asked]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else None
        pad = pad if pad is not None else tokenizer.eos_token_id
        encoded = [tokenizer(prompt)["input_ids"] for prompt in prompts]
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        attention = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention[row, width - len(ids) :] = 1
        with torch.no_grad():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=max(max_tokens for _messages, max_tokens in asked),
                do_sample=False,  # the same moment gets the same words
                pad_token_id=pad,
            )
        return [
            tokenizer.decode(
                output[row, width : width + max_tokens], skip_special_tokens=True
            ).strip()
            for row, (_messages, max_tokens) in enumerate(asked)
        ]


def _prompt_text(tokenizer: Any, messages: Sequence[Message]) -> str:
    conversation = [{"role": m["role"], "content": m["content"]} for m in messages]
    if getattr(tokenizer, "chat_template", None):
        # enable_thinking only reaches templates that know it (Qwen3's); others ignore it.
        return tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
    lines = []
    for message in conversation:
        speaker = {"system": "", "assistant": "Agent: ", "user": "Customer: "}[message["role"]]
        lines.append(speaker + message["content"])
    return "\n".join(lines) + "\nAgent:"


# --- the simulator ---------------------------------------------------------------------------

_OBJECTION_WORDS = re.compile(
    r"\b(expensive|afford|price|cost|budget|busy|not sure|don't know|later|too much|"
    r"worried|concern|hesitant|can't)\b",
    re.IGNORECASE,
)
_CASUAL_WORDS = re.compile(r"\b(hi|hey|yeah|yep|gonna|wanna|lol|cool|awesome)\b|!", re.IGNORECASE)


def dialogue_dialect(dialogue: Sequence[Mapping[str, str]]) -> str:
    """The customer's register read off their words: casual or formal."""
    customer_text = " ".join(turn["text"] for turn in dialogue if turn["speaker"] == "customer")
    return "casual" if len(_CASUAL_WORDS.findall(customer_text)) >= 2 else "formal"


def dialogue_state_index(dialogue: Sequence[Mapping[str, str]]) -> int:
    """The simulator state a real dialogue approximates.

    We can only guess what the simulator would see: how far into the call we are, and
    whether the customer's last words raise an objection.
    """
    agent_turns = sum(1 for turn in dialogue if turn["speaker"] == "agent")
    if agent_turns == 0:
        return state_index("opening", interest=1, trust=0, turn=0)
    last_customer = next(
        (turn["text"] for turn in reversed(dialogue) if turn["speaker"] == "customer"), ""
    )
    objection = "open" if _OBJECTION_WORDS.search(last_customer) else "not_raised"
    turn = min(agent_turns, DEFAULT_MAX_TURNS - 1)
    return state_index("discovery", objection, interest=1, trust=1, turn=turn)


def dialogue_from_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [
        {"speaker": "agent" if m["role"] == "assistant" else "customer", "text": m["content"]}
        for m in messages
        if m["role"] in ("user", "assistant") and m["content"] not in STAGE_DIRECTIONS
    ]


class SimulatorProvider:
    """Scripted words: the move strategy picks the move for the state, the script says it."""

    kind = SIMULATOR
    label = "the simulator"

    def __init__(self, move_strategy: Mapping[str, Any] | None = None) -> None:
        self.move_strategy = dict(move_strategy or SCRIPTED)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def answer(
        self,
        *,
        state: int,
        dialect: str,
        scenario: str | None = None,
        persona: Persona | None = None,
    ) -> tuple[str, str]:
        """(text, move) at an exact simulator state."""
        move = choose_move(self.move_strategy, state_index=state, scenario=scenario)
        return scripted_reply(move, dialect, describe_state(state, persona)), move

    def reply(self, messages: Sequence[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS) -> str:
        dialogue = dialogue_from_messages(messages)
        text, _move = self.answer(
            state=dialogue_state_index(dialogue), dialect=dialogue_dialect(dialogue)
        )
        return text


# --- choosing a provider ---------------------------------------------------------------------


def provider_for(
    target: ModelTarget,
    *,
    limits: CallLimits | None = None,
    environ: Mapping[str, str] | None = None,
) -> Provider:
    """The provider that reaches `target`."""
    limits = limits or CallLimits.from_environment(environ)
    if target.provider == VLLM:
        return VllmProvider(target, limits=limits, environ=environ)
    if target.provider == OPENAI:
        return OpenAIProvider(target, limits=limits, environ=environ)
    if target.provider == ANTHROPIC:
        return AnthropicProvider(target, limits=limits, environ=environ)
    if target.provider == TRANSFORMERS:
        return TransformersProvider(target, limits=limits)
    raise ValueError(f"No model provider '{target.provider}': choose vllm, openai or anthropic.")


@dataclass(frozen=True)
class ProviderChoice:
    """One "Runs on" / "Judge" option as a page offers it."""

    provider: str
    label: str
    available: bool
    reason: str  # why it cannot be chosen; names the missing variable


def provider_choices(environ: Mapping[str, str] | None = None) -> list[ProviderChoice]:
    """The simulator and vLLM always; OpenAI and Anthropic when the pod holds their key."""
    environ = os.environ if environ is None else environ
    choices = [
        ProviderChoice(SIMULATOR, "Simulator (scripted)", True, ""),
        ProviderChoice(VLLM, "vLLM endpoint", True, ""),
    ]
    for provider, label in ((OPENAI, "OpenAI"), (ANTHROPIC, "Anthropic")):
        name = HOSTED_KEY_ENVS[provider]
        present = bool(environ.get(name))
        choices.append(ProviderChoice(provider, label, present, "" if present else f"set {name}"))
    return choices
