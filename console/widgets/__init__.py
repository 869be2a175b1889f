"""Console widgets, one per file, grouped by screen area."""
