"""resonance.field."""
