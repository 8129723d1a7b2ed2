"""Logistic fits by Newton's method, batched in torch: many problems (a cross-validation's
folds) solved at once, on the device their rows are on.

Each problem minimises scikit-learn's `LogisticRegression(C=strength)` objective: strength ×
the (weighted) logistic loss summed over rows, plus half the squared weights, the intercept
unpenalised. Newton's method (IRLS) in float64 with a backtracking line search converges in a
handful of steps; trainers.reading.head_fit chooses the strength and warm-starts each from the
one before it.

torch is imported inside the functions, so importing this module loads no torch; never
imports Django.
"""

from __future__ import annotations

# The largest gradient entry, on scikit-learn's scale (the loss averaged over the rows'
# weight; its own default tol is 1e-4): converged well past where scikit-learn stops, so the
# two agree to its precision, not ours.
TOLERANCE = 1e-8
MAX_NEWTON_STEPS = 100
# Step sizes the line search tries at once: 1, 1/2, ... 2^-(HALVINGS-1).
HALVINGS = 30


def _objective(logits, targets, weight, strength: float, penalised):
    import torch

    loss = weight * (torch.logaddexp(torch.zeros_like(logits), logits) - targets * logits)
    return strength * loss.sum(-1) + 0.5 * penalised


def newton(design, targets, weight, strength: float, start, *, fit_intercept: bool):
    """Minimise strength · Σ weight · logistic loss + ½‖coefficients‖² (the last coefficient
    unpenalised when `fit_intercept`) for each problem of the batch: design [B, rows, p],
    targets and weight [B, rows], start [B, p]; returns the coefficients [B, p]."""
    import torch

    penalty = torch.ones(design.shape[-1], dtype=design.dtype, device=design.device)
    if fit_intercept:
        penalty[-1] = 0.0
    scale = strength * weight.sum(-1, keepdim=True)  # scikit-learn's gradient is ours / scale
    coefficients = start.clone()
    for _ in range(MAX_NEWTON_STEPS):
        logits = (design @ coefficients.unsqueeze(-1)).squeeze(-1)
        probability = torch.sigmoid(logits)
        residual = (strength * weight * (probability - targets)).unsqueeze(-1)
        gradient = (design.mT @ residual).squeeze(-1) + penalty * coefficients
        if float((gradient.abs() / scale).amax()) < TOLERANCE:
            break
        curvature = strength * weight * probability * (1.0 - probability)
        hessian = design.mT @ (design * curvature.unsqueeze(-1))
        # The intercept's own curvature can vanish when every row is fitted with certainty.
        ridge = penalty + (1.0 - penalty) * 1e-12 * scale
        hessian.diagonal(dim1=-2, dim2=-1).add_(ridge)
        step = -_solve(hessian, gradient)
        size = _step_size(
            design, targets, weight, strength, penalty, coefficients, step, logits, gradient
        )
        if not bool((size > 0).any()):
            break
        coefficients = coefficients + size.unsqueeze(-1) * step
    return coefficients


def _solve(hessian, gradient):
    """hessian⁻¹ · gradient, by Cholesky (the Hessian is positive definite: the penalty adds
    the identity); by least squares where rounding broke that."""
    import torch

    try:
        factor = torch.linalg.cholesky(hessian)
    except torch.linalg.LinAlgError:
        return torch.linalg.lstsq(hessian, gradient.unsqueeze(-1)).solution.squeeze(-1)
    return torch.cholesky_solve(gradient.unsqueeze(-1), factor).squeeze(-1)


def _step_size(design, targets, weight, strength, penalty, coefficients, step, logits, gradient):
    """Per problem, the largest of 1, 1/2, 1/4, ... that decreases the objective enough
    (Armijo), all tried at once; 0 where none does (converged to rounding)."""
    import torch

    sizes = 0.5 ** torch.arange(HALVINGS, dtype=design.dtype, device=design.device)
    direction = (design @ step.unsqueeze(-1)).squeeze(-1)
    trial = logits.unsqueeze(1) + sizes.view(1, -1, 1) * direction.unsqueeze(1)
    moved = coefficients.unsqueeze(1) + sizes.view(1, -1, 1) * step.unsqueeze(1)
    trial_objective = _objective(
        trial,
        targets.unsqueeze(1),
        weight.unsqueeze(1),
        strength,
        (penalty * moved**2).sum(-1),
    )
    current = _objective(logits, targets, weight, strength, (penalty * coefficients**2).sum(-1))
    slope = (gradient * step).sum(-1)
    accepted = trial_objective <= current.unsqueeze(-1) + 1e-4 * sizes * slope.unsqueeze(-1)
    first = accepted.to(torch.int64).argmax(-1)
    return torch.where(accepted.any(-1), sizes[first], torch.zeros_like(sizes[first]))
