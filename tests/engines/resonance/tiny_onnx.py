"""A tiny real ONNX sentence embedder for tests: a token-embedding table, written by hand.

The `onnx` package is not a dependency, so the model is encoded here straight in protobuf's
wire format: one `Gather` node from a (vocab, dim) float table, inputs `input_ids` and
`attention_mask` (int64, [batch, seq]), output `last_hidden_state` ([batch, seq, dim]).
onnxruntime runs it like any exported encoder and `Embedder` mean-pools it, so texts that
share tokens are close: a second real model, with its own file and fingerprint, beside the
bundled MiniLM (whose tokenizer it borrows).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np

VOCAB = 30522  # the MiniLM (bert-base-uncased) vocabulary


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _key(field, 2) + _varint(len(data)) + data


def _value_info(name: str, elem_type: int, dims: list[str | int]) -> bytes:
    shape = b"".join(
        _bytes(1, _bytes(2, d) if isinstance(d, str) else _int(1, d)) for d in dims
    )
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def tiny_model_bytes(dim: int = 16, seed: int = 0) -> bytes:
    """The ONNX file's bytes: a (VOCAB, dim) table drawn from `seed`."""
    table = np.random.default_rng(seed).standard_normal((VOCAB, dim)).astype("<f4")
    tensor = b"".join(_int(1, d) for d in table.shape) + _int(2, 1) + _bytes(8, "table") + _bytes(9, table.tobytes())
    node = _bytes(1, "table") + _bytes(1, "input_ids") + _bytes(2, "last_hidden_state") + _bytes(3, "gather") + _bytes(4, "Gather")
    graph = (
        _bytes(1, node) + _bytes(2, "tiny") + _bytes(5, tensor)
        + _bytes(11, _value_info("input_ids", 7, ["batch", "seq"]))
        + _bytes(11, _value_info("attention_mask", 7, ["batch", "seq"]))
        + _bytes(12, _value_info("last_hidden_state", 1, ["batch", "seq", dim]))
    )
    opset = _bytes(1, "") + _int(2, 13)
    return _int(1, 8) + _bytes(7, graph) + _bytes(8, opset)


def write_tiny_model(folder: Path, *, dim: int = 16, seed: int = 0) -> Path:
    """`folder/model.onnx` and the MiniLM `tokenizer.json` beside it; returns the model path."""
    from soul.engines.resonance.data import MINILM_TOKENIZER

    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "model.onnx"
    model.write_bytes(tiny_model_bytes(dim, seed))
    shutil.copyfile(MINILM_TOKENIZER, folder / "tokenizer.json")
    return model


assert struct.calcsize("<f") == 4
