"""Loads skeleton schemas, validates options and renders templates (used by `generate` and `weave`)."""
