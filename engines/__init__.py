"""The engines soul steps call: Chetana (affect, attention, self-model, intention) and
resonance (memory). Each engine is a library of its own: it imports nothing from `soul`
(the pipeline), from `soul.steps`, or from another engine."""
