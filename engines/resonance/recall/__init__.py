"""resonance.recall."""
