"""Serving a trained version in-process (the worker side of a serve job).

Pure Python; never imports Django."""
