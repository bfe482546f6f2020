"""Each perturbation on hand-written sentences, with the exact output for a fixed seed."""

import random

import pytest

from data_gen.perturbations import Compound, build, combined_severity, detokenize, names, tokenize
from lightning_metrics.errors import LightningMetricsError


def apply(name, sentence, seed=0, **options):
    return build(name, **options).apply(sentence, random.Random(seed))


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("The cat is on the mat.", "The cat is not on the mat."),
        ("She can swim.", "She cannot swim."),
        ("He went home.", "He did not go home."),
        ("The cat sits on the mat.", "The cat does not sit on the mat."),
        ("They go to school every day.", "They do not go to school every day."),
        ("The company has a new office.", "The company does not have a new office."),
        ("He is not happy.", "He is happy."),
        ("He didn't go to the party.", "He went to the party."),
        ("She does not like tea.", "She likes tea."),
        ("He did not eat the cake.", "He ate the cake."),
        ("It cannot be done.", "It can be done."),
    ],
)
def test_negation(sentence, expected):
    assert apply("negation", sentence) == expected


def test_antonym_reverses_the_adjective():
    out = apply("antonym", "The soup is hot.")
    assert "cold" in out and out == "The soup is cold."


def test_synonym_keeps_part_of_speech():
    assert apply("synonym", "The big house is empty.") == "The large house is empty."
    assert apply("synonym", "I bought a new car yesterday.") == "I bought a new machine yesterday."


def test_reorderings():
    assert apply("np_swap", "The dog bit the man.") == "The man bit the dog."
    assert (
        apply("clause_move", "When it rains, we stay inside the house.") == "We stay inside the house, when it rains."
    )
    assert (
        apply("adjacent_swap", "Please close the window before you leave.")
        == "Please close the before window you leave."
    )


def test_deletions():
    sentence = "The train to Berlin is running twenty minutes late today."
    assert apply("deletion", sentence) == "The train to Berlin is twenty minutes today."
    assert apply("span_deletion", sentence) == "The train to Berlin is running today."
    assert apply("deletion", "Go home.") is None  # too short to delete from


def test_anchors():
    assert apply("identity", "Anything at all.") == "Anything at all."
    pool = ["First sentence here.", "Second sentence here."]
    assert apply("unrelated", "First sentence here.", pool=pool) == "Second sentence here."
    assert apply("unrelated", "Alone.", pool=["Alone."]) is None


def test_not_applicable_returns_none():
    assert apply("np_swap", "Hello there.") is None
    assert apply("clause_move", "No comma in this one.") is None
    assert apply("negation", "Is it raining?") is None


def test_same_seed_same_output_and_severities_documented():
    for name in names():
        p = build(name, pool=["A b c d.", "E f g h."]) if name == "unrelated" else build(name)
        assert 0.0 <= p.severity <= 1.0
        s = "The old man did not see the small dog, although it barked loudly."
        assert p.apply(s, random.Random(5)) == p.apply(s, random.Random(5))


def test_compound_severity_formula():
    assert combined_severity([0.4, 0.5]) == pytest.approx(1 - 0.6 * 0.5)
    assert combined_severity([0.0]) == 0.0 and combined_severity([1.0, 0.2]) == 1.0
    text, applied, severity = Compound([build("negation"), build("antonym")]).apply(
        "The soup is hot.", random.Random(0)
    )
    assert (
        applied == ["negation", "antonym"]
        and text == "The soup is not cold."
        and severity == pytest.approx(1 - 0.1 * 0.2)
    )


def test_tokenize_round_trip_and_unknown_name():
    s = "Don't stop (please), it's fine: 3.5% more!"
    assert detokenize(tokenize(s)) == s
    with pytest.raises(LightningMetricsError, match="unknown perturbation 'shuffle'; known: adjacent_swap"):
        build("shuffle")


def test_failure_modes_in_spaced_and_unspaced_scripts():
    sentence = "The train to Berlin is running twenty minutes late today."
    cut = apply("undertranslation", sentence, seed=3)
    assert sentence.startswith(cut) and 3 <= len(cut.split()) <= 5  # 30-60% of the 10 words, from the start
    cut = apply("undertranslation", "列车今天晚点二十分钟。", seed=3)  # characters where no spaces are
    assert "列车今天晚点二十分钟。".startswith(cut) and 3 <= len(cut) <= 7
    looped = apply("duplication", sentence, seed=0)
    assert looped == sentence + " running twenty minutes late today."  # seed 0 repeats the second half
    noise = apply("gibberish", sentence, seed=1)
    assert [len(w) for w in noise.split()] == [len(w) for w in sentence.split()] and noise != sentence
    assert set(noise.replace(" ", "")) <= set(sentence.replace(" ", "")) - set(".")
    assert apply("missing_punctuation", "Well, he said: no.") == "Well he said no"
    assert apply("missing_punctuation", "列车，晚点。") == "列车晚点"
    assert apply("missing_punctuation", "no marks here") is None and apply("undertranslation", "Too short") is None
