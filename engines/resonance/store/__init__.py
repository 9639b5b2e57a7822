"""resonance.store."""
