"""Workspace-schema models of evaluation (filled by its issue)."""
