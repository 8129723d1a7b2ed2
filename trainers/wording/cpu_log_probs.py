"""The fused LM head's per-token log-probabilities, folded in place on a CPU.

TRL's fused head (DPO's and the policy's log-probabilities) projects the labelled positions
through the vocabulary in tiles and folds each tile into log-sum-exp statistics. Where Triton
does not run it folds with plain torch ops written for clarity, not for a CPU: every step of a
tile allocates a fresh `[tokens, 32,768]` float32 tensor (scaling by 1.0 twice, a mask for the
top-1 flag, `exp`, `e * z`, a one-hot, `p`, the gradient), the vocabulary is cut in two tiles
whose statistics are merged, and the backward's two products run in float32 whatever the
autocast precision (`_addmm_fp32` keeps bf16 only on CUDA), at a third of the bf16 rate here.

`LogProbsOnTheCpu` computes the same outputs in one tile over the whole vocabulary for a bounded
number of tokens, reusing two float32 work buffers for every tile and doing each elementwise step
in place: the bf16 product, a cast, the max, a shift, `exp`, two row sums and a dot product in
the forward; a cast, a shift, `exp`, a scale, the target's term and the bf16 product in the
backward. The vocabulary fits one tile, so each gradient product's sum over the vocabulary
happens inside one matrix product (float32 accumulation in oneDNN) and is rounded once.
"""

from __future__ import annotations

from typing import Any

import torch

TOKENS_PER_TILE = 256
"""Tokens projected through the whole vocabulary at once: for SmolLM2's 49,152 tokens a float32
work buffer of 50 MB, two of them, reused for every tile of a call."""

OPTIONAL_OUTPUTS = ("entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


def _compute_dtype(hidden: torch.Tensor) -> torch.dtype:
    if torch.is_autocast_enabled(hidden.device.type):
        return torch.get_autocast_dtype(hidden.device.type)
    return hidden.dtype


def _operands(
    weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The head's weight in the product's precision and its bias in float32, off the graph."""
    return weight.detach().to(dtype), None if bias is None else bias.detach().float()


def _logits_into(
    work: torch.Tensor,
    hidden_tile: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    scale: float,
) -> torch.Tensor:
    """`work[:n]` ← (hidden_tile @ weight.T + bias) · scale, in float32."""
    n = hidden_tile.shape[0]
    z = work[:n]
    if weight.dtype == torch.float32:
        torch.mm(hidden_tile, weight.t(), out=z)
    else:
        z.copy_(torch.mm(hidden_tile, weight.t()))  # the product in bf16, folded in float32
    if bias is not None:
        z.add_(bias)
    if scale != 1.0:
        z.mul_(scale)
    return z


class LogProbsOnTheCpu(torch.autograd.Function):
    """The signature and outputs of TRL's `ChunkedLogProbFunction` (log-probabilities, entropy,
    `log(sum p²)`, mean logit, top-1 flag; `None` where not in `outputs`), without final-logit
    softcapping (the caller keeps TRL's own function for models that cap).

    One difference: a target tied with the maximum logit counts as top-1 here, where TRL counts
    only the first of tied maxima. It feeds a logged token accuracy and nothing else."""

    @staticmethod
    def forward(  # noqa: PLR0913 (TRL's signature)
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        temperature: float,
        chunk_size: int,
        final_logit_softcapping: float | None = None,
        logit_scale: float = 1.0,
        outputs: tuple[str, ...] = OPTIONAL_OUTPUTS,
    ) -> tuple[torch.Tensor | None, ...]:
        if final_logit_softcapping is not None:
            raise ValueError("softcapped logits take TRL's own fused head")
        ctx.set_materialize_grads(False)
        dtype = _compute_dtype(hidden)
        scale = float(logit_scale) / float(temperature)
        n_tokens, vocab = hidden.shape[0], weight.shape[0]
        w, b = _operands(weight, bias, dtype)
        wants = {name: name in outputs for name in OPTIONAL_OUTPUTS}

        log_z = torch.empty(n_tokens, dtype=torch.float32)
        target_z = torch.empty(n_tokens, dtype=torch.float32)
        entropy = torch.empty(n_tokens, dtype=torch.float32) if wants["entropy"] else None
        sum_sq = torch.empty(n_tokens, dtype=torch.float32) if wants["log_sum_sq_probs"] else None
        mean = torch.empty(n_tokens, dtype=torch.float32) if wants["mean_logits"] else None
        top1 = torch.empty(n_tokens, dtype=torch.bool) if wants["is_top1"] else None

        rows = min(n_tokens, TOKENS_PER_TILE)
        work = torch.empty((rows, vocab), dtype=torch.float32)
        second = (
            torch.empty((rows, vocab), dtype=torch.float32)
            if wants["entropy"] or wants["log_sum_sq_probs"]
            else None
        )
        # Casts are explicit here: under autocast the dot products below would run in bf16.
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            for first in range(0, n_tokens, TOKENS_PER_TILE):
                last = min(first + TOKENS_PER_TILE, n_tokens)
                z = _logits_into(work, hidden[first:last].detach().to(dtype), w, b, scale)
                top = z.amax(-1)
                target_z[first:last] = z.gather(-1, targets[first:last].unsqueeze(-1)).squeeze(-1)
                if mean is not None:
                    mean[first:last] = z.sum(-1) / vocab
                if top1 is not None:
                    top1[first:last] = target_z[first:last] >= top
                z.sub_(top.unsqueeze(-1))  # z - max: every exp below is at most 1
                if second is None:
                    total = z.exp_().sum(-1)
                else:
                    e = torch.exp(z, out=second[: last - first])
                    total = e.sum(-1)
                    if entropy is not None:
                        # H = log Σe − Σ e·z / Σe, with z shifted by the max
                        dot = torch.bmm(e.unsqueeze(1), z.unsqueeze(-1)).view(-1)
                        entropy[first:last] = total.log() - dot / total
                    if sum_sq is not None:
                        squares = torch.bmm(e.unsqueeze(1), e.unsqueeze(-1)).view(-1)
                        sum_sq[first:last] = squares.log() - 2 * total.log()
                log_z[first:last] = top + total.log()
        log_probs = target_z - log_z

        ctx.save_for_backward(hidden, weight, bias, targets, log_z, entropy)
        ctx.dtype, ctx.scale = dtype, scale
        ctx.mark_non_differentiable(*(x for x in (sum_sq, mean, top1) if x is not None))
        return log_probs, entropy, sum_sq, mean, top1

    @staticmethod
    def backward(ctx: Any, grad_log_probs: Any, grad_entropy: Any, *_: Any) -> tuple[Any, ...]:
        hidden, weight, bias, targets, log_z, entropy = ctx.saved_tensors
        needs_hidden, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        dtype, scale = ctx.dtype, ctx.scale
        n_tokens, vocab = hidden.shape[0], weight.shape[0]
        w, b = _operands(weight, bias, dtype)
        g = None if grad_log_probs is None else grad_log_probs.float()
        ge = None if grad_entropy is None else grad_entropy.float()

        grad_hidden = torch.empty(hidden.shape, dtype=torch.float32) if needs_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32) if needs_weight else None
        grad_bias = torch.zeros(vocab, dtype=torch.float32) if needs_bias else None
        rows = min(n_tokens, TOKENS_PER_TILE)
        work = torch.empty((rows, vocab), dtype=torch.float32)
        probs = torch.empty((rows, vocab), dtype=torch.float32) if ge is not None else None
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            for first in range(0, n_tokens, TOKENS_PER_TILE):
                last = min(first + TOKENS_PER_TILE, n_tokens)
                n = last - first
                h = hidden[first:last].detach().to(dtype)
                z = _logits_into(work, h, w, b, scale)
                z.sub_(log_z[first:last].unsqueeze(-1))  # log p
                # d log p_t / dz_j = 1[j = t] − p_j;  dH / dz_j = −p_j (log p_j + H)
                if ge is None:  # then g is given: backward runs for some gradient
                    z.exp_().mul_(g[first:last].neg().unsqueeze(-1))
                else:
                    p = torch.exp(z, out=probs[:n])
                    z.add_(entropy[first:last].unsqueeze(-1)).mul_(ge[first:last].unsqueeze(-1))
                    if g is not None:
                        z.add_(g[first:last].unsqueeze(-1))
                    z.mul_(p).neg_()
                if g is not None:
                    # the target's own term
                    z.scatter_add_(
                        -1, targets[first:last].unsqueeze(-1), g[first:last].unsqueeze(-1)
                    )
                if scale != 1.0:
                    z.mul_(scale)
                grad_z = z.to(dtype)
                if grad_hidden is not None:
                    grad_hidden[first:last] = torch.mm(grad_z, w)
                if grad_weight is not None:
                    grad_weight.addmm_(grad_z.t().float(), h.float())
                if grad_bias is not None:
                    grad_bias += z.sum(0)
        return (
            None if grad_hidden is None else grad_hidden.to(hidden.dtype),
            None if grad_weight is None else grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(bias.dtype),
            None,
            None,
            None,
            None,
            None,
            None,
        )


def on_the_cpu(original: Any) -> Any:
    """TRL's fused-head function with CPU tensors (and no softcapping) sent to
    `LogProbsOnTheCpu`; every other device keeps `original`."""

    class FusedHeadLogProbs:
        folds_in_place_on_cpu = True

        @staticmethod
        def apply(hidden: torch.Tensor, weight: torch.Tensor, bias: Any, targets: Any, *rest: Any):
            softcap = rest[2] if len(rest) > 2 else None
            if hidden.device.type == "cpu" and softcap is None:
                return LogProbsOnTheCpu.apply(hidden, weight, bias, targets, *rest)
            return original.apply(hidden, weight, bias, targets, *rest)

    return FusedHeadLogProbs
