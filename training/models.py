"""Workspace-schema models of training (filled by its issue)."""
