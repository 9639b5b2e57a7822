"""LoCoMo retrieval benchmark: keyword, semantic, hybrid and RRF recall beside bm25s.

Each conversation is its own memory field; every dialogue turn is one memory, written
"speaker: text" with meta {"dia_id": ...}; each question is asked with k = 10, and the
evidence turns it names are scored (`score`): turn-level recall@5, recall@10, nDCG@10, Hit@1
and recall-all@10, and session-level recall@10 and recall-all@10 (the evidence turns'
sessions among the sessions of the top 10 turns), averaged over all questions with at least
one valid evidence id.

The dev file holds 7 of LoCoMo's 10 conversations; the other 3 are held out and never on
this machine, so every default (fusion, resonance, contiguity) is chosen on dev only.

    python benchmarks/locomo.py                       # through Field (if it exists)
    python benchmarks/locomo.py --via engine          # HybridSearcher directly (own vectors)
    python benchmarks/locomo.py --data PATH --limit 2
    python benchmarks/locomo.py --resonate --ablation # + full resonance, one row per phase off
    python benchmarks/locomo.py --embedder PATH.onnx --ingest  # another model, + ingest speed
    python benchmarks/locomo.py --resonate --context-weight 0  # each turn's vector alone

The data stays in ../shared/data (licence CC BY-NC 4.0, not copied into the repository).
Embeddings of turns and questions are cached on disk (--cache), keyed by model and text,
so reruns cost seconds; the cache holds vectors only, never the data.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo-dev.json"
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "soulgraph-bench-cache"


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo sample: turns (dia_id, "speaker: text") and questions with evidence."""

    sample_id: str
    turns: list[tuple[str, str]]
    questions: list[tuple[str, frozenset[str], int]]  # question, evidence ids, category


def load_locomo(path: Path) -> list[Conversation]:
    """Parse the LoCoMo JSON; evidence ids not among the turns (malformed) are dropped."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for sample in raw:
        conv = sample["conversation"]
        turns = []
        n = 1
        while f"session_{n}" in conv:
            turns += [(t["dia_id"], f"{t['speaker']}: {t['text']}") for t in conv[f"session_{n}"]]
            n += 1
        known = {d for d, _ in turns}
        qs = []
        for qa in sample["qa"]:
            ev = frozenset(e for e in qa.get("evidence", []) if e in known)
            if ev:
                qs.append((qa["question"], ev, int(qa.get("category", 0))))
        out.append(Conversation(sample.get("sample_id", str(len(out))), turns, qs))
    return out


class CachedEmbedder:
    """Wraps an Embedder with an on-disk vector cache (npz per model), same interface."""

    def __init__(self, inner: Any, cache_dir: Path) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.model_id = getattr(inner, "model_id", "model")
        self.config = getattr(inner, "config", None)
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.path = cache_dir / f"emb-{self.model_id}.npz"
        self._vecs: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as z:
                self._vecs = dict(zip(z["keys"].tolist(), z["vecs"], strict=True))
        self._dirty = False

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embed(self, texts: Sequence[str], *, fallback: bool = True) -> Any:
        """Embeddings from the cache, the rest from the wrapped model."""
        from soul.engines.resonance.recall.embedder import Embeddings

        keys = [self._key(t) for t in texts]
        missing = sorted({(k, t) for k, t in zip(keys, texts, strict=True)
                          if k not in self._vecs})
        if missing:
            res = self.inner.embed([t for _, t in missing], fallback=fallback)
            for (k, _), v, ok in zip(missing, res.vectors, res.ok, strict=True):
                if ok:
                    self._vecs[k] = v
            self._dirty = True
        vecs = np.stack([self._vecs.get(k, np.zeros(self.dim, np.float32)) for k in keys]) \
            if keys else np.zeros((0, self.dim), np.float32)
        ok = np.array([k in self._vecs for k in keys], dtype=bool)
        return Embeddings(vecs.astype(np.float32), ok)

    def embed_one(self, text: str, *, fallback: bool = True) -> np.ndarray:
        """One vector (cached)."""
        return self.embed([text], fallback=fallback).vectors[0]

    def __getattr__(self, name: str) -> Any:  # stats(), breaker, ... of the wrapped model
        return getattr(self.inner, name)

    def save(self) -> None:
        """Write the cache if it grew."""
        if self._dirty:
            keys = np.array(list(self._vecs))
            np.savez(self.path, keys=keys, vecs=np.stack(list(self._vecs.values())))
            self._dirty = False


METRICS = ("R@5", "R@10", "nDCG@10", "Hit@1", "Rall@10", "S-R@10", "S-Rall@10")


def session_of(dia_id: str) -> str:
    """The session of a turn: LoCoMo's dia_id is "D<session>:<turn>"."""
    return dia_id.split(":", 1)[0]


def score(ranked: Sequence[str], evidence: frozenset[str]) -> tuple[float, ...]:
    """The METRICS of one ranked list of dia_ids against the question's evidence turns
    (definitions in docs/benchmarks.md, "LoCoMo metrics"):

    turn level   R@5, R@10  share of the evidence turns in the top 5 / 10
                 nDCG@10    binary relevance, ideal = all evidence turns first
                 Hit@1      1 if the first turn retrieved is an evidence turn
                 Rall@10    1 if every evidence turn is in the top 10
    session level S-R@10    share of the evidence sessions (the sessions holding an evidence
                            turn) among the sessions of the top 10 turns
                 S-Rall@10  1 if every evidence session is among them
    """
    top = list(ranked[:10])
    r5 = len(evidence & set(top[:5])) / len(evidence)
    r10 = len(evidence & set(top)) / len(evidence)
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(top) if d in evidence)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    hit1 = float(bool(top) and top[0] in evidence)
    rall = float(evidence <= set(top))
    sessions = {session_of(d) for d in evidence}
    found = sessions & {session_of(d) for d in top}
    return r5, r10, dcg / idcg, hit1, rall, len(found) / len(sessions), float(found == sessions)


Retriever = Callable[[str], list[str]]


def bm25s_system(conv: Conversation, k1: float = 1.2) -> Retriever:
    """The bm25s library (Lucene BM25, English stop words, no stemmer) over the turns."""
    import bm25s

    ids = [d for d, _ in conv.turns]
    model = bm25s.BM25(k1=k1, b=0.75)
    model.index(bm25s.tokenize([t for _, t in conv.turns], stopwords="en",
                               show_progress=False), show_progress=False)

    def run(q: str) -> list[str]:
        toks = bm25s.tokenize([q], stopwords="en", show_progress=False)
        if not toks.vocab:
            return []
        docs, _ = model.retrieve(toks, k=min(10, len(ids)), show_progress=False)
        return [ids[i] for i in docs[0]]

    return run


def engine_systems(
    conv: Conversation, embedder: Any, ablation: bool = False
) -> dict[str, Retriever]:
    """keyword / semantic / hybrid / rrf through HybridSearcher (no store); with `ablation`,
    also the fusion variants of docs/memory.md."""
    from soul.engines.resonance.recall.bm25 import BM25Index
    from soul.engines.resonance.recall.fusion import FusionConfig
    from soul.engines.resonance.recall.hybrid import HybridSearcher
    from soul.engines.resonance.recall.index import VectorIndex

    texts = [t for _, t in conv.turns]
    ids = np.arange(len(texts))
    bm = BM25Index()
    bm.add_many(ids, texts)
    res = embedder.embed(texts)
    vx = VectorIndex(embedder.dim)
    vx.add(ids[res.ok], res.vectors[res.ok])
    weighted = HybridSearcher(bm, vx)
    rrf = HybridSearcher(bm, vx, FusionConfig(method="rrf"))
    variants = {
        "hybrid min-max (seed formula)": FusionConfig(normalisation="minmax"),
        "hybrid no hub correction": FusionConfig(hub_penalty=0.0),
        "hybrid no coverage": FusionConfig(coverage_floor=1.0),
        "hybrid neither": FusionConfig(hub_penalty=0.0, coverage_floor=1.0),
    } if ablation else {}
    dia = [d for d, _ in conv.turns]

    def system(searcher: HybridSearcher, mode: str) -> Retriever:
        def run(q: str) -> list[str]:
            vec = embedder.embed([q]).vectors[0] if mode != "keyword" else None
            return [dia[h.id] for h in searcher.search(q, vec, 10, mode=mode)]
        return run

    out = {"keyword": system(weighted, "keyword"), "semantic": system(weighted, "semantic"),
           "hybrid": system(weighted, "hybrid"), "hybrid rrf": system(rrf, "hybrid")}
    for name, cfg in variants.items():
        out[name] = system(HybridSearcher(bm, vx, cfg), "hybrid")
    return out


def ingest_rate(embedder: Any, conv: Conversation) -> str:
    """Memories per second into a fresh Field with `remember_many` (embedding included, no
    cache): what `soul memory ingest` sees."""
    from soul.engines.resonance import Field

    texts = [t for _, t in conv.turns]
    with tempfile.TemporaryDirectory() as tmp, Field.open(Path(tmp) / "f", embedder) as field:
        started = time.perf_counter()
        field.remember_many([{"text": t, "meta": {"dia_id": d}} for d, t in conv.turns])
        elapsed = time.perf_counter() - started
    return (f"ingest: {len(texts)} turns of {conv.sample_id} in {elapsed:.1f} s = "
            f"{len(texts) / elapsed:.0f} memories/s ({getattr(embedder, 'model_id', '?')})\n")


# Phases a resonance ablation switches off one at a time (hebbian is off in these runs: it
# changes the graph as queries go, so the variants would not start from the same field).
ABLATED = ("spreading", "scoring", "inhibition", "basin", "keyword", "semantic")


def field_systems(conv: Conversation, embedder: Any, root: Path, resonate: bool = False,
                  ablation: bool = False, **options: Any) -> dict[str, Retriever]:
    """keyword / semantic / hybrid (+ RRF) through Field, exactly as the hidden eval does:
    one `remember(text, meta={"dia_id": ...})` per turn, `recall(q, k=10, mode=...)`.
    With `resonate`: `resonate(q, k=10)` too, and with `ablation` one row per phase off.
    `options` go to every `Field.open` (e.g. ``context_weight``)."""
    from soul.engines.resonance import Field, QualityGateRefused

    out: dict[str, Retriever] = {}
    fields = {
        "default": Field.open(root / conv.sample_id, embedder=embedder, **options),
        "rrf": Field.open(root / f"{conv.sample_id}-rrf", embedder=embedder, method="rrf",
                          **options),
    }
    if resonate and ablation:  # the same turns without temporal contiguity edges
        fields["nocontig"] = Field.open(root / f"{conv.sample_id}-nc", embedder=embedder,
                                        **{**options, "contiguity": None})
    for field in fields.values():
        for dia_id, text in conv.turns:
            with contextlib.suppress(QualityGateRefused):  # too short: absent from all modes
                field.remember(text, meta={"dia_id": dia_id})

    def system(f: Any, mode: str) -> Retriever:
        def run(q: str) -> list[str]:
            return [h.meta["dia_id"] for h in f.recall(q, k=10, mode=mode)]
        return run

    for mode in ("keyword", "semantic", "hybrid"):
        out[mode] = system(fields["default"], mode)
    out["hybrid rrf"] = system(fields["rrf"], "hybrid")

    def resonance(f: Any, disabled: frozenset[str]) -> Retriever:
        def run(q: str) -> list[str]:
            return [h.meta["dia_id"] for h in f.resonate(q, k=10, disabled=disabled)]
        return run

    if resonate:
        default = fields["default"]
        if ablation:
            for phase in ABLATED:
                out[f"resonate − {phase}"] = resonance(default, frozenset({phase, "hebbian"}))
            out["resonate − contiguity"] = resonance(fields["nocontig"], frozenset({"hebbian"}))
        out["resonate − hebbian"] = resonance(default, frozenset({"hebbian"}))
        out["resonate"] = resonance(default, frozenset())  # last: its Hebbian edits stay

    def close(_q: str) -> list[str]:
        for f in fields.values():
            f.close()
        return []

    out["_close"] = close
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print a markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--via", choices=("auto", "field", "engine"), default="auto")
    ap.add_argument("--limit", type=int, default=0, help="first N conversations only")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    ap.add_argument("--ablation", action="store_true",
                    help="with --via engine: also the fusion variants; with --resonate: one "
                         "row per resonance phase switched off")
    ap.add_argument("--resonate", action="store_true",
                    help="through Field: full resonance (Field.resonate) beside hybrid")
    ap.add_argument("--embedder", default=None,
                    help="a built-in embedder name or an ONNX model path (default: minilm)")
    ap.add_argument("--context-weight", type=float, default=None, metavar="W",
                    help="through Field: the session context weight of each memory's vector "
                         "(FieldConfig.context_weight; 0 = each turn's text alone; default: "
                         "the field's default)")
    ap.add_argument("--ingest", action="store_true",
                    help="also time ingest: the first conversation's turns into a fresh field, "
                         "embedded uncached (memories/s)")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"no data at {args.data} (see shared/data/README.md)", file=sys.stderr)
        return 2
    from soul.engines.resonance import load_embedder

    via = args.via
    if via == "auto":
        try:
            from soul.engines.resonance import Field  # noqa: F401
            via = "field"
        except ImportError:
            via = "engine"
    convs = load_locomo(args.data)
    if args.limit:
        convs = convs[: args.limit]
    embedder = CachedEmbedder(load_embedder(args.embedder), args.cache)
    if args.ingest:
        print(ingest_rate(load_embedder(args.embedder), convs[0]))
    results: dict[str, list[tuple[float, ...]]] = {}
    per_conv: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for conv in convs:
            systems: dict[str, Retriever] = {}
            if importlib.util.find_spec("bm25s") is not None:  # the reference, when installed
                systems["bm25s k1=1.2"] = bm25s_system(conv)
            if via == "field":
                options = {} if args.context_weight is None else \
                    {"context_weight": args.context_weight or None}
                systems.update(field_systems(conv, embedder, Path(tmp), args.resonate,
                                             args.ablation, **options))
            else:
                systems.update(engine_systems(conv, embedder, args.ablation))
            closer = systems.pop("_close", None)
            for name, run in systems.items():
                rows = [score(run(q), ev) for q, ev, _ in conv.questions]
                results.setdefault(name, []).extend(rows)
                per_conv.setdefault(conv.sample_id, {})[name] = float(
                    np.mean([r[1] for r in rows]))
            if closer:
                closer("")
            embedder.save()
    elapsed = time.perf_counter() - t0
    n_q = sum(len(c.questions) for c in convs)
    context = "" if via != "field" else "context weight " + (
        "default, " if args.context_weight is None else f"{args.context_weight:g}, ")
    digest = hashlib.sha256(args.data.read_bytes()).hexdigest()[:12]
    print(f"LoCoMo: {len(convs)} conversations ({', '.join(c.sample_id for c in convs)}; "
          f"{args.data.name} sha256 {digest}…), {n_q} questions, via {via}, "
          f"embedder {embedder.model_id}, {context}{elapsed:.1f} s\n")
    print("| system | " + " | ".join(METRICS) + " |\n" + "|---" * (len(METRICS) + 1) + "|")
    summary = {}
    for name, rows in results.items():
        m = np.mean(np.array(rows), axis=0)
        summary[name] = dict(zip(METRICS, (float(v) for v in m), strict=True))
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in m) + " |")
    best_single = max(summary.get("keyword", {}).get("R@10", 0),
                      summary.get("semantic", {}).get("R@10", 0))
    if "hybrid" in summary:
        gain = 100 * (summary["hybrid"]["R@10"] - best_single)
        print(f"\nhybrid R@10 − best single-signal R@10: {gain:+.1f} points")
    extra = " / resonate" if "resonate" in summary else ""
    print(f"\nper conversation R@10 (keyword / semantic / hybrid{extra}):")
    for sid, row in per_conv.items():
        print(f"  {sid}: {row.get('keyword', 0):.3f} / {row.get('semantic', 0):.3f} / "
              f"{row.get('hybrid', 0):.3f}" + (f" / {row['resonate']:.3f}" if extra else ""))
    if args.json:
        print(json.dumps({"summary": summary, "per_conversation": per_conv}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
