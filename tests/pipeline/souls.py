"""Canned model replies and small blueprints for the built-in souls, shared by the runtime tests."""

from __future__ import annotations


def claudius_reply(
    text: str = "Hello, Ada. Compilers, then — a noble way to suffer.",
    *,
    check: str = "true",
    model: str = "# Ada\n\n## Persona\nBuilds compilers.",
    note: str = "Learned that Ada builds compilers.",
    state: str | None = None,
) -> str:
    """A well-formed fused Claudius reply (sections in the seed's order)."""
    reply = (
        '<internal_monologue verb="pondered">She builds compilers; she will want precision.</internal_monologue>\n'
        f'<external_dialogue verb="quipped">{text}</external_dialogue>\n'
        f"<user_model_check>{check}</user_model_check>\n"
        f"<user_model_update>{model}</user_model_update>\n"
        f"<model_change_note>{note}</model_change_note>\n"
    )
    if state is not None:
        reply += f"<soul_state_check>true</soul_state_check>\n<soul_state_update>{state}</soul_state_update>\n"
    return reply


SAMANTHA_TURN = [
    '<internal_monologue verb="wondered">A new person! I wonder what they love.</internal_monologue>',
    "<decision>ask a question</decision><decision_reason>I know nothing yet.</decision_reason>",
    '<external_dialogue verb="said">Hi! What are you working on these days?</external_dialogue>',
]
SAMANTHA_LEARNS = [
    "<mental_query>true</mental_query>",
    "<user_model_update># User\n\n## Interests & Domains\nCompilers.</user_model_update>"
    "<model_change_note>They build compilers.</model_change_note>",
]


def fan_of_three(last: str) -> str:
    """A chained soul whose steps a, b and c answer side by side, then `last` (a step's line)."""
    return ("soul: fan\nversion: 1\nmode: chained\nsteps:\n"
            + "".join(f"  {q}: {{uses: mental_query, with: {{query: {q}?}}}}\n" for q in "abc") + f"  {last}\n")
