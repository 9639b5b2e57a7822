"""A small deterministic embedder for code-index tests: letter frequencies, L2-normalised."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


class LetterEmbedder:
    """Letter frequencies, L2-normalised; counts its calls."""

    dim = 26
    model_id = "letters"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> SimpleNamespace:
        self.calls += 1
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return SimpleNamespace(vectors=out)
