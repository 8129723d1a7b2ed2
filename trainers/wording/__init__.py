"""Wording: bases, the reward model, RLHF's PPO update, DPO, the spec, the measures.

Pure Python; never imports Django."""
