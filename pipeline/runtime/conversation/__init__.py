"""The conversation's length: how a long conversation stays within each model's window.

`history` reads the stored turns back as speaker-labelled messages; `budget` counts tokens
and holds a call's `Budget` (its window, reply reserve and share of history); `view` is what
a turn's calls share of it (the history's messages and their costs, worked out once); `folding`
gives each call its budget and folds the turns no call shows any more into the running
summary, which `summaries` writes (a model call, or a truncation digest).
"""

from soul.runtime.conversation import layout as parts  # the prompt's parts, where they lie
from soul.runtime.conversation.budget import (
    MESSAGE_OVERHEAD,
    TOKENIZER,
    Budget,
    BudgetReport,
    Counter,
    count_tokens,
    over_budget,
    pieces,
    with_margin,
)
from soul.runtime.conversation.folding import budget_for, fold_history
from soul.runtime.conversation.history import (
    HISTORY_TYPES,
    REPLY_TYPE,
    SUMMARY_TYPE,
    USER_TYPE,
    ConversationSummary,
    HistoryReading,
    HistoryTurn,
    history_of,
    label_of,
    labelled,
    labelled_messages,
    messages_of,
)
from soul.runtime.conversation.summaries import (
    DEFAULT_WORDS,
    SummaryCall,
    instructions,
    system_prompt,
    truncation_digest,
)
from soul.runtime.conversation.view import ConversationView, TurnMessages
from soul.runtime.conversation.window import call_window, share_out, turn_window

__all__ = [
    "DEFAULT_WORDS",
    "HISTORY_TYPES",
    "MESSAGE_OVERHEAD",
    "REPLY_TYPE",
    "SUMMARY_TYPE",
    "TOKENIZER",
    "USER_TYPE",
    "Budget",
    "BudgetReport",
    "ConversationSummary",
    "ConversationView",
    "Counter",
    "HistoryReading",
    "HistoryTurn",
    "SummaryCall",
    "TurnMessages",
    "budget_for",
    "call_window",
    "count_tokens",
    "fold_history",
    "history_of",
    "instructions",
    "label_of",
    "labelled",
    "labelled_messages",
    "messages_of",
    "over_budget",
    "parts",
    "pieces",
    "share_out",
    "system_prompt",
    "truncation_digest",
    "turn_window",
    "with_margin",
]
