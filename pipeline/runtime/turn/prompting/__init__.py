"""A call's prompt: what the calls of a turn share and what each adds, fitted to its budget.

`prompt` builds a call's messages (`PromptBuilder`: the system prompt's head, the steps'
instructions, the response format, the history and the input); `fitting` fits them to the
call's token budget, sharing what the turn's calls share (`Fitter`, `Prompt`); `blocks` are
the system prompt's fixed blocks and cache points; `not_run` is how a step that did not run
reads in a template.
"""

from soul.runtime.turn.prompting.fitting import Fitter, Prompt, TurnParts
from soul.runtime.turn.prompting.not_run import NotRun, not_run_steps
from soul.runtime.turn.prompting.prompt import MESSAGE_NOTE, MOMENT_NOTE, PromptBuilder

__all__ = ["MESSAGE_NOTE", "MOMENT_NOTE", "Fitter", "NotRun", "Prompt", "PromptBuilder", "TurnParts", "not_run_steps"]
