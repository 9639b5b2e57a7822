"""The cognitive report: everything `soul chetana` shows (affect, focus, calibration,
mastery, intentions), as a frozen value with a JSON form and a terminal rendering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .atma import AtmaDarshana
from .bhava import Affect, Bhava
from .dhyana import Dhyana
from .focus import Ranking, Weighted
from .mastery import calibration_label, velocity_label
from .sankalpa import Intention, Sankalpa

__all__ = ["CognitiveReport", "MasteryRow", "build_report"]

BAR_WIDTH = 16
GOAL_BAR_WIDTH = 12
_STATUS_MARK = {"active": "▶", "paused": "‖", "achieved": "✓", "abandoned": "✗"}


class MasteryRow(NamedTuple):
    """One tool's line in the mastery table."""

    tool: str
    success_rate: float
    ci_low: float  # Wilson 95 % interval
    ci_high: float
    total: int
    successes: int
    trend: str
    avg_latency: float  # ms


@dataclass(frozen=True, slots=True)
class CognitiveReport:
    """A snapshot of the four subsystems for inspection (`soul chetana`, `/chetana`)."""

    affect: Affect
    concepts: Ranking  # top focus concepts, highest first ("auth" in report.concepts)
    tools: Ranking  # tool attention, highest first
    calibration: float
    calibration_label: str
    learning_velocity: float
    velocity_label: str
    mastery: tuple[MasteryRow, ...]  # by success rate, highest first
    limitations: tuple[str, ...]
    style: dict[str, float]
    intentions: tuple[Intention, ...]  # every status, oldest first
    achieved: int
    self_assessment: str

    @property
    def top_concepts(self) -> Ranking:
        """The original's name for `concepts`."""
        return self.concepts

    @property
    def top_tools(self) -> Ranking:
        """The original's name for `tools` (tool attention)."""
        return self.tools

    @property
    def active_intentions(self) -> tuple[Intention, ...]:
        """The intentions still being pursued."""
        return tuple(i for i in self.intentions if i.status == "active")

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-safe data (`soul chetana --json`)."""
        return {
            "affect": self.affect._asdict(),
            "focus": {
                "concepts": [{"concept": c.name, "weight": c.weight} for c in self.concepts],
                "tools": [{"tool": t.name, "weight": t.weight} for t in self.tools],
            },
            "self": {
                "calibration": self.calibration,
                "calibration_label": self.calibration_label,
                "learning_velocity": self.learning_velocity,
                "velocity_label": self.velocity_label,
                "mastery": [
                    {**row._asdict(), "confidence_interval": [row.ci_low, row.ci_high]}
                    for row in self.mastery
                ],
                "limitations": list(self.limitations),
                "style": dict(self.style),
                "assessment": self.self_assessment,
            },
            "intentions": [
                {**i._asdict(), "evidence": list(i.evidence), "subgoals": list(i.subgoals)}
                for i in self.intentions
            ],
            "achieved": self.achieved,
        }

    def __getitem__(self, key: str) -> Any:
        """`report["affect"]["valence"]`: the JSON form's sections, then the fields by name."""
        data = self.to_dict()
        if key in data:
            return data[key]
        if not key.startswith("_") and hasattr(self, key):
            return getattr(self, key)
        raise KeyError(key)

    def render(self) -> str:
        """The report as the seed's `/chetana` text: bars, focus, mastery, intentions."""
        a = self.affect
        lines = ["━━━ Bhava (भाव — Affect) ━━━"]
        lines.append(f"  Valence      {_bar((a.valence + 1) / 2, BAR_WIDTH)}  {a.valence:+.2f}")
        for name, value in (
            ("Arousal", a.arousal),
            ("Confidence", a.confidence),
            ("Frustration", a.frustration),
        ):
            lines.append(f"  {name:<12} {_bar(value, BAR_WIDTH)}   {value:.2f}")
        lines += ["", "━━━ Dhyana (ध्यान — Attention) ━━━"]
        lines.append("  Focus:  " + (_weights(self.concepts[:5]) or "(nothing yet)"))
        lines.append("  Tools:  " + (_weights(self.tools[:5]) or "(none used)"))
        lines += ["", "━━━ Atma-Darshana (आत्मदर्शन — Self) ━━━"]
        lines.append(f"  Calibration:  {self.calibration:.2f} ({self.calibration_label})")
        lines.append(f"  Learning:     {self.learning_velocity:+.3f}/call ({self.velocity_label})")
        if self.mastery:
            top = "  ".join(
                f"{r.tool} {round(r.success_rate * 100)}% [{r.ci_low:.2f}, {r.ci_high:.2f}]"
                for r in self.mastery[:5]
            )
            lines.append(f"  Top:  {top}")
        for limitation in self.limitations:
            lines.append(f"  ! {limitation}")
        lines += ["", "━━━ Sankalpa (संकल्प — Intentions) ━━━"]
        shown = [i for i in self.intentions if i.status in ("active", "paused")]
        width = max((len(i.goal) for i in shown), default=0)
        width = min(max(width, 10), 40)
        for i in shown:
            goal = i.goal if len(i.goal) <= width else i.goal[: width - 1] + "…"
            line = (
                f"  {_STATUS_MARK[i.status]} {goal:<{width}}  {_bar(i.progress, GOAL_BAR_WIDTH)}"
                f"  {round(i.progress * 100):>3}%  [{i.priority}]"
            )
            if i.stale_turns:
                line += f" (stale: {i.stale_turns} turn{'s' if i.stale_turns != 1 else ''})"
            lines.append(line)
        if not shown:
            lines.append("  (no open intentions)")
        if self.achieved:
            lines.append(
                f"  ✓ {self.achieved} goal{'s' if self.achieved != 1 else ''} achieved this session"
            )
        return "\n".join(lines)


def _bar(fraction: float, width: int) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def _weights(items: tuple[Weighted, ...]) -> str:
    return "  ".join(f"{name} ({weight:.2f})" for name, weight in items)


def build_report(
    bhava: Bhava, dhyana: Dhyana, atma: AtmaDarshana, sankalpa: Sankalpa
) -> CognitiveReport:
    """Assemble a report from the four subsystems (the controller's `cognitive_report`)."""
    mastery = tuple(
        MasteryRow(
            name,
            m.success_rate,
            m.confidence_interval[0],
            m.confidence_interval[1],
            m.total_invocations,
            m.successes,
            m.trend,
            m.avg_latency,
        )
        for name, m in atma.ranked_tools()
    )
    intentions = tuple(sankalpa.get_intentions())
    return CognitiveReport(
        affect=bhava.state,
        concepts=Ranking(dhyana.top_concepts()),
        tools=Ranking(dhyana.top_tools()),
        calibration=atma.calibration,
        calibration_label=calibration_label(atma.calibration, atma.calibration_tolerance),
        learning_velocity=atma.learning_velocity,
        velocity_label=velocity_label(atma.learning_velocity),
        mastery=mastery,
        limitations=tuple(atma.known_limitations),
        style=dict(atma.style_fingerprint),
        intentions=intentions,
        achieved=sum(1 for i in intentions if i.status == "achieved"),
        self_assessment=atma.get_self_assessment(),
    )
