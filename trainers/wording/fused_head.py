"""TRL's fused LM head made to fit a CPU, for the wording trainers that use it (DPO, RLHF's
policy update). Pure Python (TRL and torch inside the function), never Django.
"""

from __future__ import annotations

from typing import Any


def fused_head_for_the_cpu() -> None:
    """Make TRL's fused LM head (DPO's and the policy's log-probabilities) fit a CPU: project
    only the positions that have a label, and fold the tiles in place
    (`trainers.wording.cpu_log_probs`).

    Why the first: TRL 1.16 compacts to the labelled positions only where Triton runs (CUDA,
    XPU); on any other device it projects every position — the prompt and the padding as well
    as the reply — through the whole vocabulary, to keep tile shapes fixed for Neuron's
    compiler. A CPU compiles nothing, and there the wasted projections were most of a DPO step
    (profiled on SmolLM2-135M: the fused head took 44% of the step; replies are about a third
    of the tokens). Why the second: TRL's torch fallback for the fold allocates a fresh float32
    tile for every elementwise step and runs the backward's products in float32; on 800 reply
    tokens of SmolLM2's vocabulary (heap kept, as here) it took 0.80 s a forward and backward,
    0.49 s folded in place, and a 10-step DPO run peaked at 7.59 GB against 5.94 GB. TRL's own
    choices stay for every other device."""
    import trl.trainer.utils as trl_utils

    from trainers.wording.cpu_log_probs import on_the_cpu

    original = getattr(trl_utils, "_use_triton", None)
    if original is not None and not getattr(original, "compacts_on_cpu", False):

        def compact_on_cpu(device: Any) -> bool:
            return device.type == "cpu" or original(device)

        compact_on_cpu.compacts_on_cpu = True  # type: ignore[attr-defined]
        trl_utils._use_triton = compact_on_cpu
    function = getattr(trl_utils, "_ChunkedLogProbFunction", None)
    if function is not None and not getattr(function, "folds_in_place_on_cpu", False):
        trl_utils._ChunkedLogProbFunction = on_the_cpu(function)
