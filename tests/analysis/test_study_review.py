"""The fit's out-of-fold record is what the review study reads, and the study's rule counts
right."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from tests.analysis import fit_analysis, study_review
from tunesmith.analysis import key, meter


def test_the_record_saved_by_the_fit_is_read_by_the_study(tmp_path) -> None:
    rng = np.random.default_rng(0)
    width = len(meter.INPUTS)
    model = meter.LevelModel(
        rng.normal(size=(3, 4, width)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    )
    record = fit_analysis.OutOfFold()
    songs, measured = [], []
    for i, (truth, tracker) in enumerate(((120.0, 120.0), (90.0, 180.0))):
        song = fit_analysis.DevSong("corpus48", f"song{i}", "", truth, "4/4", "C", "major")
        found = [
            SimpleNamespace(bpm=tracker * f, factor=Fraction(f), metre="4/4")
            for f in (Fraction(1, 2), Fraction(1), Fraction(2))
        ]
        x = rng.normal(size=(3, width))
        record.add_tempo(i, i, model, x, found, song)
        values = {"tracker": np.array([tracker, 3.0]), "extractor": np.array(["C major"])}
        p = np.full(24, 0.01)
        p[key.KEYS.index((0, "major"))] = 0.77
        record.add_key(i, p, [k == (0, "major") for k in key.KEYS], values)
        songs.append(song)
        measured.append(values)
    path = tmp_path / "out_of_fold.npz"
    record.save(path, songs, measured)

    with np.load(path, allow_pickle=False) as stored:
        d = dict(stored)
    assert list(d["offsets"]) == [0, 3, 6] and d["scores"].shape == (6, 3)
    # each song's choice is the analysis's own from the members' mean score
    for s in range(2):
        scores = d["scores"][3 * s : 3 * s + 3]
        expected = model.log_odds(d["x"][3 * s : 3 * s + 3])
        assert np.allclose(scores.mean(axis=1), expected)
    x, right, shipped, folds = study_review.tempo_rows(d)
    assert x.shape == (2, len(study_review.TEMPO_INPUTS)) and list(folds) == [0, 1]
    assert all(0.0 < p <= 1.0 for p in shipped)
    x, right, shipped = study_review.key_rows(d)
    assert list(right) == [True, True] and np.allclose(shipped, 0.77)
    assert x[0, study_review.KEY_INPUTS.index("extractor_agrees")] == 1.0


def test_the_fewest_right_listed_at_any_levels() -> None:
    # tempi: two wrong (0.2, 0.6), three right (0.5, 0.7, 0.9); keys: one wrong (0.3), one
    # right (0.4). 80% of the three wrong is all three: that needs the tempo level above 0.6
    # (listing the right 0.5) and the key level above 0.3 (listing nothing right).
    tempo = np.array([0.2, 0.6, 0.5, 0.7, 0.9])
    tempo_right = np.array([False, False, True, True, True])
    found = study_review.listed_at_any_levels(
        tempo, tempo_right, np.array([0.3, 0.4]), np.array([False, True])
    )
    assert found == 1
