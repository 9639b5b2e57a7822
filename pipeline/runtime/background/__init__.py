"""The background mind: processes that run beside the conversation (the subconscious).

`mind` is what a process knows between cycles (mood and criteria, impulses, its histories)
and what a turn shares with it; `processes` schedules cycles (`LoopSchedule`) behind a
runner interface (in-process asyncio here; `runtime.durable` runs them as workflows);
`cycles` runs a session's processes cycle by cycle (`Background`); `triggers` fires
spontaneous turns (S_loud, idle timers).
"""

from soul.runtime.background.cycles import Background
from soul.runtime.background.mind import Mind, observed_in
from soul.runtime.background.processes import LoopSchedule, runner_choice
from soul.runtime.background.triggers import S_LOUD_REASONS, TriggerSpec

__all__ = [
    "S_LOUD_REASONS",
    "Background",
    "LoopSchedule",
    "Mind",
    "TriggerSpec",
    "observed_in",
    "runner_choice",
]
