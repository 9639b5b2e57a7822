"""Compile-time benchmarks: cold `soul validate claudius`, and compiling a 50-step blueprint.

Run: python benchmarks/compile.py [--runs N]
Goals (issue 2): cold validate <= 0.4 s (lazy imports); 50-step compile <= 30 ms.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def generated_blueprint(n: int) -> str:
    """A fused blueprint of n steps: a spine of monologue/query steps with gates and fan-out."""
    lines = ["soul: big", "version: 1", "state: {mood: calm}", "steps:", "  s0: {uses: internal_monologue}"]
    for i in range(1, n - 1):
        dep = f"s{i - 1}" if i % 5 else f"s{max(0, i - 5)}"
        if i % 3 == 0:
            lines.append(f"  s{i}: {{uses: mental_query, after: [{dep}], with: {{query: q{i}}}, when: \"state.mood == 'calm'\"}}")
        else:
            lines.append(f"  s{i}: {{uses: internal_monologue, after: [{dep}]}}")
    lines.append(f"  s{n - 1}: {{uses: external_dialogue, after: [s{n - 2}], stream: true}}")
    return "\n".join(lines) + "\n"


def cold_validate(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "soul.cli", "validate", "-q", "claudius"], capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr.decode())
    return times


def compile_times(n: int, runs: int) -> list[float]:
    from soul.compiler.plan import compile_blueprint

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.yaml"
        path.write_text(generated_blueprint(n))
        plan = compile_blueprint(path)  # warm: imports, registry, schema
        from soul.language.expressions import analyse_expression
        assert len(plan.turn.steps) == n
        times = []
        for _ in range(runs):
            analyse_expression.cache_clear()  # measure the real parse work, not the cache
            start = time.perf_counter()
            compile_blueprint(path)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    cold = cold_validate(args.runs)
    big = compile_times(50, args.runs * 4)
    rows = [
        ("cold `soul validate claudius` (new process)", statistics.median(cold), max(cold), 0.4),
        ("validate + compile, 50-step blueprint (warm process)", statistics.median(big), max(big), 0.030),
    ]
    print(f"{'benchmark':55} {'median':>10} {'max':>10} {'goal':>8}  ok")
    for name, median, worst, goal in rows:
        print(f"{name:55} {median * 1000:8.1f}ms {worst * 1000:8.1f}ms {goal * 1000:6.0f}ms  {'yes' if median <= goal else 'NO'}")


if __name__ == "__main__":
    main()
