"""Statistics over versions: the Bradley-Terry leaderboard.

Pure Python; never imports Django."""
