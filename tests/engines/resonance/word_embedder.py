"""A small deterministic embedder for Field tests: texts sharing words are close."""

from __future__ import annotations

import hashlib
import re
from types import SimpleNamespace

import numpy as np


class WordEmbedder:
    """Bag of hashed words: texts sharing words are close; 'FAIL' rows fall back to zero."""

    dim = 64

    def embed(self, texts: list[str]) -> SimpleNamespace:
        out = np.zeros((len(texts), self.dim), np.float32)
        ok = np.ones(len(texts), bool)
        for i, text in enumerate(texts):
            if "FAIL" in text:
                ok[i] = False
                continue
            for word in re.findall(r"\w+", text.lower()):
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            out[i] /= max(np.linalg.norm(out[i]), 1e-9)
        return SimpleNamespace(vectors=out, ok=ok)
