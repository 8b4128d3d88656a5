import random
from collections import Counter

from tunesmith.families.stable_audio_3.prompts import full_prompt, prompt_tags, training_prompt


def test_tags_become_key_value_pieces_in_display_order():
    pieces = prompt_tags("a warm loop", "json", {"bpm": "92", "title": "Dusty", "date": "2024"})
    assert pieces == ["Title: Dusty", "Year: 2024", "BPM: 92", "Prompt: a warm loop"]
    assert (
        full_prompt(pieces, "lpz") == "lpz, Title: Dusty, Year: 2024, BPM: 92, Prompt: a warm loop"
    )


def test_a_caption_made_from_tags_or_the_file_name_is_not_repeated():
    assert prompt_tags("Title: X", "embedded", {"title": "X"}) == ["Title: X"]
    assert prompt_tags("dusty keys", "filename", {}) == ["Prompt: dusty keys"]


def test_half_shuffled_half_subsets_and_the_trigger_eighty_percent():
    pieces = ["Title: A", "Genre: B", "BPM: 90", "Prompt: c"]
    rng = random.Random(0)
    prompts = [training_prompt(pieces, rng, "lpz", 0.8) for _ in range(20000)]
    with_trigger = sum(p.startswith("lpz, ") for p in prompts) / len(prompts)
    assert abs(with_trigger - 0.8) < 0.015
    counts = Counter(len(p.removeprefix("lpz, ").split(", ")) for p in prompts)
    # all four: the shuffled half plus a quarter of the subset half
    assert abs(counts[4] / len(prompts) - (0.5 + 0.5 / 4)) < 0.015
    assert abs(counts[1] / len(prompts) - 0.5 / 4) < 0.015
    again = [training_prompt(pieces, random.Random(0), "lpz") for _ in range(1)]
    assert again[0] == prompts[0]


def test_relabel_renames_only_the_tags_given_and_keeps_their_order():
    from types import MappingProxyType

    from tunesmith.families.stable_audio_3.prompts import DISPLAY, relabel

    pieces = prompt_tags("a warm loop", "json", {"bpm": "92", "date": "2024", "title": "A: B"})
    display = MappingProxyType({**DISPLAY, "date": "Date", "title": "Name"})
    assert relabel(pieces, display) == [
        "Name: A: B",
        "Date: 2024",
        "BPM: 92",
        "Prompt: a warm loop",
    ]
    assert relabel(pieces, MappingProxyType(DISPLAY)) == pieces
    assert relabel(["free text", "Year:2024"], display) == ["free text", "Year:2024"]


def test_lyrics_never_reach_a_prompt():
    from tunesmith.families.stable_audio_3.prompts import LYRICS

    pieces = prompt_tags("a song", "json", {"lyrics": "la la la", "genre": "pop"})
    assert pieces == ["Genre: pop", "Prompt: a song"]
    assert all("la la" not in training_prompt(pieces, random.Random(s)) for s in range(50))
    assert LYRICS == ""
