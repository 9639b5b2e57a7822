"""A model's reply as one speaker's line (engines/dialogue/replies.py): the made-up turns of
the others are cut, echoes of the prompt removed, the original's 150-word limit kept."""

from __future__ import annotations

import time

from soul.engines.dialogue import clean_reply

NAMES = ("socrates", "athena", "fixy")


def test_a_plain_reply_is_kept_as_it_is() -> None:
    text = "Freedom needs limits. Socrates, what do you think? But: the garden grows."
    assert clean_reply(text, "athena", NAMES) == text


def test_the_turns_the_model_writes_for_the_others_are_cut() -> None:
    text = ("Freedom binds us to our choices.\nAthena replied: The answer lies in ethics.\n"
            "Socrates: So it does. Fixy: Stop.")
    assert clean_reply(text, "Socrates", NAMES) == "Freedom binds us to our choices."
    # a label after a sentence's end cuts too; a name inside a sentence does not
    assert clean_reply("I agree with Athena here. Athena: thanks!", "socrates", NAMES) == "I agree with Athena here."


def test_a_reply_that_opens_with_a_label_keeps_that_segment_without_it() -> None:
    assert clean_reply("Socrates: I ask again, what is justice?", "socrates", NAMES) == "I ask again, what is justice?"
    text = "The user asked: What is the relation between freedom and responsibility?\nAthena replied: Ethics."
    assert clean_reply(text, "socrates", NAMES) == "What is the relation between freedom and responsibility?"


def test_echoes_of_the_prompt_go() -> None:
    instruction = "Question a hidden assumption in what was just said: what are we taking for granted?"
    text = f"{instruction} We assume that choice is free.\n\nRespond now: ```"
    assert clean_reply(text, "athena", NAMES, echoes=(instruction,)) == "We assume that choice is free."
    assert clean_reply("```\n```", "athena", NAMES) == ""


def test_at_most_150_words() -> None:
    assert clean_reply("word " * 400, "athena", NAMES) == " ".join(["word"] * 150) + "…"


def test_cleaning_is_linear_in_the_text() -> None:
    hostile = ["Socrates said. Athena: x. " * 20000,  # about 500 KB of labels
               "." + " " * 100_000 + "x", "Athena replied" + " " * 100_000 + "x", "Athena (" + "x" * 39 + " " * 100_000]
    for text in hostile:  # CPU time of this process: other work on the machine does not count
        start = time.process_time()
        clean_reply(text, "fixy", NAMES)
        assert time.process_time() - start < 2.0, text[:20]


def test_an_echo_changed_at_its_end_loses_the_sentences_it_repeats() -> None:
    instruction = ("The dialogue is going in circles: the same ideas keep returning in the same words. "
                   "Name the shared premise and ask for one new angle.")
    text = "The dialogue is going in circles: the same ideas keep returning in the same words. Name a new angle, please."
    assert clean_reply(text, "fixy", NAMES, echoes=(instruction,)) == "Name a new angle, please."


def test_the_speakers_own_segment_wins_over_the_turns_made_up_before_it() -> None:
    assert clean_reply("Athena: I would say this.\nSocrates: And I say that.", "socrates", NAMES) == "And I say that."
    # only the others' turns: the first, without its label, is what the model said
    assert clean_reply("Socrates:\nAthena: I'm ready to begin.", "socrates", NAMES) == "I'm ready to begin."
