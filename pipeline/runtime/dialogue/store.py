"""A dialogue's outcome and where it is kept: `DialogueResult` (what `soul dialogue --json`
writes), and the saved state `$SOUL_HOME/dialogues/<id>.json` — written atomically after
every turn (a temporary file renamed over the old; secrets redacted) and read back to resume.

The state holds the metrics checkpoint too (`metrics_checkpoint`: the metrics reader's sums,
series and vocabulary, see engines/dialogue/running.py). It is derived from the turns' words,
so it is saved only when redaction left every turn as it was read: a turn that held a secret
would otherwise leave its words, lower-cased, in the vocabulary (the next read then reads the
saved, redacted turns again, and the save after it keeps their checkpoint).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soul.errors import RunError
from soul.runtime.events import DialogueTurn, DreamCycle, FixyGated, FixyIntervened, MetricsUpdated

EVENTS = {cls.__name__: cls for cls in (DialogueTurn, FixyIntervened, FixyGated, DreamCycle, MetricsUpdated)}
METRICS_CHECKPOINT = "metrics_checkpoint"  # the saved state's key of the metrics checkpoint


@dataclass(frozen=True)
class DialogueResult:
    """A dialogue's outcome: the transcript (Fixy's turns included), the interventions, the
    gate's rewrites, the dreams, the metrics and their per-turn series."""

    id: str
    name: str
    seed: int
    transcript: tuple[DialogueTurn, ...]
    interventions: tuple[FixyIntervened, ...] = ()
    gated: tuple[FixyGated, ...] = ()
    dreams: tuple[DreamCycle, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what `soul dialogue --json` writes."""
        return {
            "dialogue": self.id, "soul": self.name, "seed": self.seed,
            "transcript": [t.to_dict() for t in self.transcript],
            "interventions": [i.to_dict() for i in self.interventions],
            "gated": [g.to_dict() for g in self.gated],
            "dreams": [d.to_dict() for d in self.dreams],
            "metrics": self.metrics, "series": self.series,
        }


def build_result(dialogue_id: str, name: str, seed: int, events: Sequence[Any], metrics: dict[str, Any],
                 series: dict[str, Any], speakers: Sequence[str], energy_start: float) -> DialogueResult:
    """The result of `events`, with each speaker's energy added to the series: at every turn,
    its level after its own turns, carried over the others' (after a dream, `energy_start`)."""
    kinds: dict[type, list[Any]] = {}
    for event in events:
        kinds.setdefault(type(event), []).append(event)
    energies: dict[str, list[float | None]] = {a: [] for a in speakers}
    now: dict[str, float | None] = dict.fromkeys(speakers)
    for turn in kinds.get(DialogueTurn, []):
        for agent, values in energies.items():
            values.append(turn.energy if turn.speaker == agent else now[agent])
        if turn.speaker in now and turn.energy is not None:
            now[turn.speaker] = energy_start if "dream" in turn.flags else turn.energy
    return DialogueResult(
        dialogue_id, name, seed, tuple(kinds.get(DialogueTurn, ())), tuple(kinds.get(FixyIntervened, ())),
        tuple(kinds.get(FixyGated, ())), tuple(kinds.get(DreamCycle, ())), metrics, {**series, "energy": energies},
    )


def dialogues_dir(home: Path | None = None) -> Path:
    """`$SOUL_HOME/dialogues`, where dialogues are saved (created on demand)."""
    from soul.store import data_home

    folder = data_home(home) / "dialogues"
    folder.mkdir(exist_ok=True)
    return folder


def write_state(path: Path, data: Mapping[str, Any]) -> Path:
    """Write a dialogue's state: secrets redacted, a temporary file renamed over the old (a
    crash mid-write leaves the previous turn's state). The metrics checkpoint is left out
    when redaction changed it or any turn (see above)."""
    from soul.store import redact_data

    clean = redact_data(dict(data))
    if clean.get(METRICS_CHECKPOINT) is not None and (
            clean[METRICS_CHECKPOINT] != data[METRICS_CHECKPOINT]
            or clean.get("rules", {}).get("turns") != data.get("rules", {}).get("turns")):
        clean[METRICS_CHECKPOINT] = None
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(clean, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return path


def load_state(home: Path | None, dialogue_id: str) -> dict[str, Any]:
    """The saved state of dialogue `dialogue_id` (a unique prefix will do); RunError saying
    what is wrong and what the latest dialogues are otherwise."""
    if not re.fullmatch(r"[0-9a-f]{4,32}", dialogue_id):
        raise RunError(f"--resume {dialogue_id!r}: a dialogue id is hex digits, as printed when it started")
    folder = dialogues_dir(home)
    matches = sorted(folder.glob(f"{dialogue_id}*.json"))
    if len(matches) != 1:
        known = ", ".join(p.stem for p in sorted(folder.glob("*.json"))[-5:]) or "none"
        what = "no stored dialogue" if not matches else "several stored dialogues"
        raise RunError(f"--resume {dialogue_id}: {what} with that id in {folder} (latest: {known})")
    try:
        data = json.loads(matches[0].read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{matches[0]}: cannot read the saved dialogue ({exc}); move it aside") from exc
    if not isinstance(data, dict) or "rules" not in data:
        raise RunError(f"{matches[0]}: not a saved dialogue; move it aside")
    return data


def events_from(saved: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The events of a saved state, as the dataclasses they were (unknown kinds skipped)."""
    events = []
    for raw in saved:
        cls = EVENTS.get(str(raw.get("event")))
        if cls is None:
            continue
        values = {k: (tuple(v) if k in ("flags", "marks") else v) for k, v in raw.items() if k != "event"}
        try:
            events.append(cls(**values))
        except TypeError as exc:
            raise RunError(f"the saved dialogue holds a malformed {cls.__name__} event ({exc}); move it aside") from exc
    return events
