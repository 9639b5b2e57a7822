"""resonance.resonate."""
