"""Wording: the reward model, RLHF (its PPO update apart), DPO, the spec, the measures,
and what the fits share (common).

Pure Python; never imports Django."""
