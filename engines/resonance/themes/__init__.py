"""resonance.themes."""
