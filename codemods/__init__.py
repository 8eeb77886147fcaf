"""One rewrite (or report) per module; mapping tables as YAML under data/<target>/."""
