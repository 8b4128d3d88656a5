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
