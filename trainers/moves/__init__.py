"""Move strategy: the simulator, Q-learning, PPO over moves, the move reward model, value
iteration, the off-line comparison.

Pure Python; never imports Django."""
