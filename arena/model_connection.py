"""A model connection: the fields of a model role — a world's judge (Environment → Judge,
arena.judge.world_judge_choice) or a version's agent (policies) — checked before they are stored,
with one set of rules for both: a provider offered here, a model name that is not a key, and an
address the server may call.
"""

from __future__ import annotations

import os
import re

from arena.errors import ModelConnectionBadRequest, ModelConnectionConflict
from levers9.outbound import outbound_problem
from levers9.providers import (
    ANTHROPIC,
    HOSTED_KEY_ENVS,
    OPENAI,
    VLLM,
    base_url_problem,
    key_env_problem,
    scrub,
)

_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_LOOKS_LIKE_KEY = re.compile(r"^(?:sk|pk|rk)-|^sk_|^hf_", re.IGNORECASE)


def _model_name_clean(model: str) -> str:
    model = (model or "").strip()
    if not model:
        raise ModelConnectionBadRequest("Name the model, such as gpt-4o-mini or Qwen/Qwen3-14B.")
    if _LOOKS_LIKE_KEY.match(model) or scrub(model) != model:
        # A model field is shown on pages and in the API: a key typed there would leak.
        raise ModelConnectionBadRequest(
            "That looks like a key, not a model name: type the model name."
        )
    if not _MODEL_NAME.match(model):
        raise ModelConnectionBadRequest(
            f"'{model}' is not a model name: letters, digits and . _ : / @ + - only."
        )
    return model


def model_connection_clean(
    *,
    provider: str,
    model: str,
    endpoint_url: str = "",
    lora_adapter: str = "",
    api_key_env: str = "",
) -> dict[str, str]:
    """The fields of a model role (agent or judge) as they will be stored, or a
    ModelConnectionError saying what is wrong. OpenAI and Anthropic are refused
    (ModelConnectionConflict) while their key is missing."""
    if provider not in (VLLM, OPENAI, ANTHROPIC):
        raise ModelConnectionBadRequest(
            f"No model provider '{provider}': choose vllm, openai or anthropic."
        )
    model = _model_name_clean(model)
    if provider in HOSTED_KEY_ENVS:
        name = HOSTED_KEY_ENVS[provider]
        if not os.environ.get(name):
            label = "OpenAI" if provider == OPENAI else "Anthropic"
            raise ModelConnectionConflict(
                f"{label} is not offered here: set {name} on the dashboard pod."
            )
        return {"provider_model": model, "endpoint_url": "", "lora_adapter": "", "api_key_env": ""}
    endpoint_url = (endpoint_url or "").strip()
    problem = base_url_problem(endpoint_url) or key_env_problem((api_key_env or "").strip())
    # A typed address is called by the server: only public hosts, or those an operator allowed.
    problem = problem or outbound_problem(endpoint_url)
    if problem:
        raise ModelConnectionBadRequest(problem)
    lora_adapter = (lora_adapter or "").strip()
    if lora_adapter:
        lora_adapter = _model_name_clean(lora_adapter)
    return {
        "provider_model": model,
        "endpoint_url": endpoint_url,
        "lora_adapter": lora_adapter,
        "api_key_env": (api_key_env or "").strip(),
    }
