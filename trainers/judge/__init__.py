"""The judge's pure fitting code: a world's judge learned from its rows, measured on what it
never saw.

Pure Python; never imports Django."""
