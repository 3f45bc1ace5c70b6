"""Per-question metrics on tiny hand-made cases: evidence recall, answer coverage, LoCoMo token F1."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gravity_core.eval.hosts import render_turn
from gravity_core.eval.metrics import (
    answer_covered,
    content_words,
    evidence_recall,
    locomo_f1,
    normalize_answer,
    text_words,
    token_f1,
)
from gravity_core.schema import Utterance


def test_evidence_recall_is_the_share_of_gold_turns_in_context() -> None:
    assert evidence_recall(["D1:1", "D2:3"], {"D1:1", "D5:5"}) == 0.5
    assert evidence_recall(["D1:1", "D1:1"], {"D1:1"}) == 1.0
    assert evidence_recall(["D1:1"], set()) == 0.0


def test_evidence_recall_without_evidence_is_none_not_zero_or_one() -> None:
    assert evidence_recall([], {"D1:1"}) is None


def test_content_words_drop_stop_words_and_lower_case() -> None:
    assert content_words("The week before 7 May, 2023") == {"week", "7", "may", "2023"}
    assert content_words("She went to THE Museum") == {"went", "museum"}


def test_answer_of_only_stop_words_keeps_its_words() -> None:
    assert content_words("No") == {"no"}
    assert not answer_covered("No", text_words("yes it was"))
    assert answer_covered("No", text_words("no, never"))


def test_coverage_needs_every_content_word() -> None:
    context = text_words("[1:56 pm on 7 May, 2023] Caroline: I went to a support group yesterday.")
    assert answer_covered("7 May 2023", context)
    assert answer_covered("the support group", context)
    assert not answer_covered("8 May 2023", context)
    assert not answer_covered("a support meeting", context)


def test_coverage_matches_a_date_in_the_rendered_session_stamp() -> None:
    turn = Utterance(
        id="D1:1",
        speaker="Ben",
        text="I went to Lisbon last week.",
        session="s1",
        timestamp=datetime(2023, 3, 14, tzinfo=UTC),
    )
    assert answer_covered("The week before 14 March 2023", text_words(render_turn(turn)))


def test_numbers_match_as_digits_words_and_ordinals() -> None:
    assert answer_covered("three cats", text_words("she has 3 cats"))
    assert answer_covered("3 cats", text_words("she has three cats"))
    assert answer_covered("21 January", text_words("on the 21st of January"))
    assert not answer_covered("2022", text_words("back in 2021"))


def test_an_empty_answer_is_never_covered() -> None:
    assert not answer_covered("", text_words("anything at all"))


def test_normalize_answer_follows_locomo() -> None:
    assert normalize_answer("The Cat, and a Dog!") == "cat dog"


def test_token_f1_stems_and_scores_overlap() -> None:
    assert token_f1("painting sunsets", "painted a sunset") == 1.0
    assert token_f1("red bike", "red") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert token_f1("blue", "red") == 0.0
    assert token_f1("", "red") == 0.0


def test_locomo_f1_multi_hop_averages_best_match_per_gold_item() -> None:
    # gold items: "cat" (matched by "cat") and "dog" (no match) -> (1 + 0) / 2
    assert locomo_f1("a cat, a hamster", "a cat, a dog", "multi-hop") == 0.5
    assert locomo_f1("dog, cat", "cat, dog", "multi-hop") == 1.0


def test_locomo_f1_open_domain_ignores_the_rationale_after_a_semicolon() -> None:
    assert locomo_f1("likely yes", "Likely yes; he liked Lisbon", "open-domain") == 1.0
    assert locomo_f1("likely yes", "Likely yes; he liked Lisbon", "single-hop") < 1.0


def test_words_the_answer_repeats_from_the_question_are_not_needed() -> None:
    question = "Can you remind me what the recommended ratio of tea tree oil to carrier oil is?"
    context = text_words("assistant: mix 1 drop of tea tree oil with 10 drops of a carrier oil")
    assert answer_covered("The recommended ratio is 1:10", context, question)
    assert not answer_covered("The recommended ratio is 1:10", context)
    assert not answer_covered("The recommended ratio is 1:12", context, question)


def test_an_answer_made_only_of_question_words_needs_them_all() -> None:
    question = "Did she move to Lisbon or to Porto?"
    assert not answer_covered("Porto", text_words("she loved Lisbon"), question)
    assert answer_covered("Porto", text_words("she moved to Porto"), question)
