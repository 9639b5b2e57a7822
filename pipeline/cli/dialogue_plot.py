"""`soul dialogue --plot FILE.png`: the dialogue's signals over its turns, drawn with matplotlib.

matplotlib is the `plot` extra and is imported only here, with the Agg backend (no display
needed). Four panels share the turn axis: circularity per turn (window 6) and topic drift (with
an embedder); the new concepts each turn brings; each agent's energy (dreams show as the
recharges); each agent's conflict index at its turns (it moves with the drives). Fixy's turns
are dotted vertical lines in every panel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soul.errors import SoulError


def plot(result: Any, target: Path) -> Path:
    """Draw `result` (a `DialogueResult`) into the PNG `target`; returns the path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # checked before the run; a broken install still gets words
        raise SoulError(f"--plot needs matplotlib: pip install 'soulgraph[plot]' ({exc})") from exc
    series: dict[str, Any] = result.series
    turns = list(range(1, len(result.transcript) + 1))
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    quality, novelty, energy, conflict = axes
    for name, label in (("circularity", "circularity (window 6)"), ("topic_drift", "topic drift")):
        points = _points(turns, series.get(name))
        if points:
            quality.plot([t for t, _ in points], [v for _, v in points], marker=".", label=label)
    quality.set_ylabel("rate")
    quality.set_ylim(-0.05, 1.05)
    points = _points(turns, series.get("novelty"))
    if points:
        novelty.bar([t for t, _ in points], [v for _, v in points], color="tab:green", label="new concepts")
    novelty.set_ylabel("novelty")
    for agent, values in sorted((series.get("energy") or {}).items()):
        points = _points(turns, values)
        if points:
            energy.plot([t for t, _ in points], [v for _, v in points], marker=".", label=agent)
    energy.set_ylabel("energy")
    by_agent: dict[str, list[tuple[int, float]]] = {}
    for t, value in _points(turns, series.get("conflict")):
        by_agent.setdefault(result.transcript[t - 1].speaker, []).append((t, value))
    for agent, points in sorted(by_agent.items()):  # sorted as the energy lines: the same colours
        conflict.plot([t for t, _ in points], [v for _, v in points], marker=".", label=agent)
    conflict.set_ylabel("conflict index")
    conflict.set_xlabel("turn")
    for turn in (t.turn for t in result.transcript if t.fixy):
        for ax in axes:
            ax.axvline(turn, color="goldenrod", linestyle=":", linewidth=1)
    from matplotlib.ticker import MaxNLocator

    conflict.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize="small")
    fig.suptitle(f"{result.name}: {len(result.transcript)} turns (Fixy's turns dotted)")
    fig.tight_layout()
    try:
        fig.savefig(target, format="png", dpi=100)
    except OSError as exc:
        raise SoulError(f"--plot {target}: cannot write the PNG ({exc.strerror or exc})") from exc
    finally:
        plt.close(fig)
    return target


def _points(turns: list[int], values: Any) -> list[tuple[int, float]]:
    """(turn, value) pairs of a series, leaving out turns without a value."""
    if not values:
        return []
    return [(t, float(v)) for t, v in zip(turns, values, strict=False) if v is not None]
