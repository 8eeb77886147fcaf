"""The per-file engine and the rule framework: rule base classes, file contexts, options,
ignore comments and the registry. It imports no rule module."""
