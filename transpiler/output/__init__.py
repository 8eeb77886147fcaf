"""What a run shows and writes besides converted code: terminal output, reports, summaries."""
