"""resonance.graph."""
