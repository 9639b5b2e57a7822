"""Code indexing speed on a real repository (default: this project), cold and incremental.

    python benchmarks/code_index.py [ROOT] [--search N]

The tree is copied to a temporary folder first (the skipped folders left out), so the run
can edit a file without touching the original. Rows: a cold index, a second run with no
changes (stat only), a run after one file's content changed, and a run after one file's
mtime changed with the same bytes (hashed, not parsed). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from soul.engines.resonance.code import CodeIndex
from soul.engines.resonance.code.index import SKIP_DIRS, IndexReport


def _row(what: str, r: IndexReport) -> str:
    rate = r.files_seen / max(r.seconds, 1e-9)
    parsed = f"{r.files_parsed / max(r.seconds, 1e-9):,.0f}" if r.files_parsed > 1 else "—"
    return (f"| {what} | {r.files_seen} | {r.files_parsed} | {r.seconds:.2f} | {rate:,.0f} | {parsed} | "
            f"{r.symbols} | {r.calls} | {r.resolved_share:.1%} |")


def run(root: Path, searches: int) -> None:
    with tempfile.TemporaryDirectory(prefix="code-index-bench-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(root, src, symlinks=True, ignore=shutil.ignore_patterns(*SKIP_DIRS, "*.egg-info"))
        rows = []
        with CodeIndex.open(Path(tmp) / "index") as idx:
            cold = idx.index(src)
            rows.append(_row("cold", cold))
            rows.append(_row("again, nothing changed", idx.index(src)))
            target = next(p for p in sorted(src.rglob("*.py")) if p.stat().st_size > 2000)
            target.write_text(target.read_text() + "\n\ndef _bench_added() -> None:\n    print('x')\n")
            rows.append(_row(f"one file edited ({target.relative_to(src)})", idx.index(src)))
            st = target.stat()
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
            rows.append(_row("one file touched (same bytes)", idx.index(src)))
            stats = idx.stats()
            queries = ["spread activation", "parse blueprint", "embed texts", "recall hybrid", "write ahead log"]
            idx.search_symbols(queries[0])  # builds the BM25 index
            times = []
            for i in range(searches):
                t = time.perf_counter()
                idx.search_symbols(queries[i % len(queries)], 10)
                times.append((time.perf_counter() - t) * 1000)
        print(f"root: {root} ({cold.files_seen} files; {', '.join(f'{k} {v}' for k, v in sorted(cold.languages.items()))})")
        print("load average:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
        print()
        print("| run | files seen | parsed | seconds | files seen/s | parsed/s | symbols | calls | resolved |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
        named = stats["calls_to_indexed_names"]
        print()
        print(f"resolved of the calls whose name an indexed symbol carries: {stats['resolved']}/{named} "
              f"({stats['resolved'] / max(named, 1):.1%}); the rest call builtins and libraries")
        if times:
            print()
            print(f"search_symbols k=10 (BM25 only), {searches} queries: p50 {statistics.median(times):.2f} ms, "
                  f"max {max(times):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--search", type=int, default=200, help="symbol searches to time")
    args = parser.parse_args()
    run(Path(args.root).resolve(), args.search)


if __name__ == "__main__":
    main()
