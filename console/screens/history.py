"""Job history (placeholder until the screen lands)."""
