"""The fused head's fold on a CPU: the same outputs and gradients as TRL's own function, over
several tiles of tokens, and only CPU tensors without softcapping take it."""

from __future__ import annotations

import pytest
import torch
from trl.kernels.chunked_logprob import ChunkedLogProbFunction

import trainers.wording.cpu_log_probs as cpu_log_probs
from trainers.wording.cpu_log_probs import OPTIONAL_OUTPUTS, LogProbsOnTheCpu, on_the_cpu

ALL = ("log_probs", *OPTIONAL_OUTPUTS)


def _inputs(tokens: int = 37, hidden: int = 24, vocab: int = 301, *, bias: bool = True):
    generator = torch.Generator().manual_seed(7)
    h = torch.randn(tokens, hidden, generator=generator, requires_grad=True)
    w = (torch.randn(vocab, hidden, generator=generator) * 0.3).requires_grad_()
    b = (torch.randn(vocab, generator=generator) * 0.1).requires_grad_() if bias else None
    targets = torch.randint(0, vocab, (tokens,), generator=generator)
    return h, w, b, targets


def _run(function, h, w, b, targets, *, temperature=0.7, scale=1.3, outputs=ALL):
    leaves = [x for x in (h, w, b) if x is not None]
    for leaf in leaves:
        leaf.grad = None
    log_probs, entropy, sum_sq, mean, top1 = function.apply(
        h, w, b, targets, temperature, 128, None, scale, outputs
    )
    # a loss through both differentiable outputs, as a policy with an entropy term has
    loss = (log_probs * torch.linspace(0.5, 1.5, len(log_probs))).sum()
    if entropy is not None:
        loss = loss - 0.3 * entropy.sum()
    loss.backward()
    return (log_probs, entropy, sum_sq, mean, top1), [leaf.grad.clone() for leaf in leaves]


def _close(mine: torch.Tensor, reference: torch.Tensor, *, atol: float = 1e-4) -> None:
    torch.testing.assert_close(
        mine.detach().double(), reference.detach().double(), atol=atol, rtol=1e-4
    )


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(cpu_log_probs, "TOKENS_PER_TILE", 8)  # 37 tokens: five tiles, one short


@pytest.mark.parametrize("bias", [True, False])
def test_outputs_and_gradients_equal_trls_over_several_tiles(small_tiles, bias):
    h, w, b, targets = _inputs(bias=bias)
    theirs, their_grads = _run(ChunkedLogProbFunction, h, w, b, targets)
    ours, our_grads = _run(LogProbsOnTheCpu, h, w, b, targets)
    for name, mine, reference in zip(ALL, ours, theirs, strict=True):
        if name == "is_top1":
            assert torch.equal(mine, reference)
        else:
            _close(mine, reference)
    for mine, reference in zip(our_grads, their_grads, strict=True):
        _close(mine, reference)


def test_log_probs_alone_skip_the_other_outputs_and_still_differentiate(small_tiles):
    h, w, b, targets = _inputs()
    theirs, their_grads = _run(ChunkedLogProbFunction, h, w, b, targets, outputs=("log_probs",))
    ours, our_grads = _run(LogProbsOnTheCpu, h, w, b, targets, outputs=("log_probs",))
    assert ours[1:] == (None, None, None, None)
    _close(ours[0], theirs[0])
    for mine, reference in zip(our_grads, their_grads, strict=True):
        _close(mine, reference)


def test_under_bf16_autocast_the_entropy_stays_float32_exact():
    """The product runs in bf16; the folds after it must not (autocast would cast the entropy's
    dot products too): against float64 on the same bf16-rounded inputs."""
    h, w, _, targets = _inputs(tokens=16, hidden=32, vocab=257, bias=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        log_probs, entropy, *_ = LogProbsOnTheCpu.apply(h, w, None, targets, 1.0, 128, None, 1.0)
    logits = h.detach().bfloat16().double() @ w.detach().bfloat16().double().t()
    exact = torch.log_softmax(logits.bfloat16().double(), -1)
    _close(log_probs, exact.gather(-1, targets[:, None]).squeeze(-1))
    _close(entropy, -(exact.exp() * exact).sum(-1), atol=1e-3)


def test_only_cpu_tensors_without_softcapping_are_folded_here():
    calls = []

    class Original:
        @staticmethod
        def apply(*args):
            calls.append(args)
            return "theirs"

    dispatch = on_the_cpu(Original)
    h, w, b, targets = _inputs()
    assert dispatch.apply(h, w, b, targets, 1.0, 128, 30.0, 1.0, ALL) == "theirs"
    assert len(calls) == 1
    ours = dispatch.apply(h, w, b, targets, 1.0, 128, None, 1.0, ALL)
    assert len(calls) == 1
    assert ours[0].shape == (len(targets),)
