"""Text engines for what LibCST does not parse: shell scripts, YAML, span edits."""
