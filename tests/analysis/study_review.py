"""Would a second model of the review's doubt list fewer right values? A study on the fit's
out-of-fold readings (tests/analysis/fit_analysis.py saves them: OutOfFold).

The review lists a tempo or a key whose probability is under its level. This fits, in place of
the probability alone, a logistic model of whether the value is right on more of what a reading
says of its own doubt (TEMPO_INPUTS, KEY_INPUTS), on three folds' readings, and scores it on the
fourth (the fit's folds of whole corpora). For each set of inputs it prints the right values
listed with 80% of the wrong ones caught: at the levels fit_analysis weighs (its LEVELS, its
rule) and at any levels. Then how the wrong tempi and the right ones differ on those values.
docs/conventions/labels.md has the figures.

    .venv/bin/python -m tests.analysis.study_review [OUT_OF_FOLD.npz]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tests.analysis import fit_analysis

RATIOS = (2.0, 0.5, 1.5, 2 / 3, 3.0, 1 / 3, 4 / 3, 0.75)  # the runner-up tempo over the chosen
TEMPO_INPUTS = (
    "bias",
    "probability",  # of the chosen tempo (logit)
    "weakest_member",  # the least any member network gives it (logit)
    "members_spread",  # the members' standard deviation of it
    "runner_up",  # the next tempo's probability (logit)
    *(f"runner_up_at_{r:.3g}" for r in RATIOS),
    "tracker_agrees",  # the beat tracker's tempo within 4% of the chosen
    "tracker_confidence",
    "act_tempo",  # the network's values for the chosen reading
    "act_metre",
    "log_bpm",
    "log_bpm_squared",
    "groups",  # how many tempi were weighed, over 10
)
KEY_INPUTS = (
    "bias",
    "probability",
    "runner_up",
    "extractor_agrees",  # KeyExtractor names the chosen key
    "runner_up_relative",
    "runner_up_parallel",
    "runner_up_fifth",
    "minor",
)
TEMPO_SETS = {
    "the tempo's probability alone": ["bias", "probability"],
    "with the members' agreement and the runner-up": [
        "bias",
        "probability",
        "weakest_member",
        "members_spread",
        "runner_up",
    ],
    "with everything, for the tempo": list(TEMPO_INPUTS),
}
KEY_SETS = {
    "the key's probability alone": ["bias", "probability"],
    "every key input": list(KEY_INPUTS),
}


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def decided(d: dict, s: int) -> tuple[list, object, list]:
    """Song `s`'s out-of-fold hypotheses (bpm and metre), the one the analysis chooses and the
    tempo groups, chosen as analysis.meter.decision chooses from the members' mean score."""
    from tunesmith.analysis import meter

    a, b = d["offsets"][s], d["offsets"][s + 1]
    found = [SimpleNamespace(bpm=float(d["bpm"][j]), metre=str(d["metre"][j])) for j in range(a, b)]
    best, _, groups = meter.decision(found, fit_analysis._softmax(d["scores"][a:b].mean(axis=1)))
    return found, best, groups


def tempo_rows(d: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(TEMPO_INPUTS per song, right, the shipped probability, fold) of every song's tempo,
    chosen from its out-of-fold reading as the analysis chooses (analysis.meter.decision)."""
    from tunesmith.analysis import meter

    act = {name: meter.INPUTS.index(name) for name in ("act_tempo", "act_metre")}
    offsets = d["offsets"]
    rows, right, shipped = [], [], []
    for s in range(len(d["song"])):
        a = offsets[s]
        scores = d["scores"][a : offsets[s + 1]]  # hypotheses x members
        found, best, groups = decided(d, s)
        chosen = groups[0]
        members = np.array(
            [
                sum(fit_analysis._softmax(scores[:, m])[i] for i in chosen.members)
                for m in range(scores.shape[1])
            ]
        )
        second = groups[1] if len(groups) > 1 else None
        ratio = second.bpm / chosen.bpm if second else 0.0
        tracker_bpm, tracker_confidence = d["tracker"][s]
        x = d["x"][a + next(i for i in chosen.members if found[i] is best)]
        rows.append(
            [
                1.0,
                _logit(chosen.probability),
                _logit(float(members.min())),
                float(members.std()),
                _logit(second.probability) if second else -9.0,
                *(float(second is not None and abs(ratio / r - 1) < 0.04) for r in RATIOS),
                float(abs(best.bpm / tracker_bpm - 1) <= 0.04),
                tracker_confidence / 5.0,
                x[act["act_tempo"]],
                x[act["act_metre"]],
                math.log(best.bpm / 110.0),
                math.log(best.bpm / 110.0) ** 2,
                len(groups) / 10,
            ]
        )
        right.append(fit_analysis._tempo_right(best.bpm, float(d["truth_bpm"][s])))
        shipped.append(chosen.probability)
    return np.array(rows), np.array(right), np.array(shipped), np.asarray(d["fold"])


def key_rows(d: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(KEY_INPUTS per song, right, the shipped probability) of every song's key."""
    from tunesmith.analysis import key

    rows, right, shipped = [], [], []
    for s, p in enumerate(d["key_p"]):
        first, second = np.argsort(-p)[:2]
        (t1, s1), (t2, s2) = key.KEYS[first], key.KEYS[second]
        rows.append(
            [
                1.0,
                _logit(float(p[first])),
                _logit(float(p[second])),
                float(d["key_extractor"][s] == first),
                float(s1 != s2 and (t2 - t1) % 12 == (9 if s1 == "major" else 3)),
                float(s1 != s2 and t1 == t2),
                float(s1 == s2 and (t2 - t1) % 12 in (5, 7)),
                float(s1 == "minor"),
            ]
        )
        right.append(bool(d["key_right"][s][first]))
        shipped.append(float(p[first]))
    return np.array(rows), np.array(right), np.array(shipped)


def cross_validated(x: np.ndarray, right: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Each song's probability of being right from a logistic model fitted on the other
    folds: fit_analysis.fit's conditional logit over two candidates, right (x) and wrong (0)."""
    out = np.zeros(len(right))
    for k in np.unique(folds):
        problem = [
            (np.stack([row, np.zeros(len(row))]), np.array([1.0, 0.0] if ok else [0.0, 1.0]))
            for row, ok in zip(x[folds != k], right[folds != k], strict=True)
        ]
        w = fit_analysis.fit(problem, x.shape[1])
        out[folds == k] = 1 / (1 + np.exp(-(x[folds == k] @ w)))
    return out


def listed_at_any_levels(tempo, tempo_right, key, key_right) -> int:
    """The fewest right values listed with 80% of the wrong tempi and keys caught, the two
    levels free."""
    wrong_keys = np.sort(key[~key_right])
    need_all = math.ceil(0.8 * ((~tempo_right).sum() + len(wrong_keys)))
    best = None
    for level in np.concatenate([[0.0, 1.01], tempo[~tempo_right] + 1e-9]):
        need = need_all - (tempo[~tempo_right] < level).sum()
        if need > len(wrong_keys):
            continue
        key_level = wrong_keys[need - 1] + 1e-9 if need > 0 else 0.0
        listed = (tempo[tempo_right] < level).sum() + (key[key_right] < key_level).sum()
        best = listed if best is None else min(best, listed)
    return int(best)


def main(argv: list[str]) -> None:
    path = (
        Path(argv[0])
        if argv
        else fit_analysis.CACHE / fit_analysis.CACHE_VERSION / "out_of_fold.npz"
    )
    with np.load(path, allow_pickle=False) as stored:
        d = dict(stored)
    xt, tempo_right, tempo_shipped, folds = tempo_rows(d)
    xk, key_right, key_shipped = key_rows(d)
    print(f"{len(tempo_right)} songs: {tempo_right.sum()} tempi and {key_right.sum()} keys right")

    def line(name, tempo, key) -> str:
        pairs = (list(zip(tempo_right, tempo, strict=True)), list(zip(key_right, key, strict=True)))
        a, b, caught, listed = fit_analysis.joint_levels(*pairs)
        free = listed_at_any_levels(tempo, tempo_right, key, key_right)
        return f"  {name}: levels {a:.2f}, {b:.2f}, caught {caught}, listed {listed}; any: {free}"

    print("right values listed with 80% of the wrong tempi and keys caught:")
    print(line("the probabilities, as shipped", tempo_shipped, key_shipped))
    for key_name, key_set in KEY_SETS.items():
        key = cross_validated(xk[:, [KEY_INPUTS.index(n) for n in key_set]], key_right, folds)
        for tempo_name, tempo_set in TEMPO_SETS.items():
            columns = [TEMPO_INPUTS.index(n) for n in tempo_set]
            tempo = cross_validated(xt[:, columns], tempo_right, folds)
            print(line(f"logistic, {tempo_name}; {key_name}", tempo, key))

    wrong = ~tempo_right
    column = TEMPO_INPUTS.index
    print(f"\n{wrong.sum()} wrong tempi against {tempo_right.sum()} right:")
    for name, values in (
        ("probability above 0.75", tempo_shipped > 0.75),
        ("every member gives it more than half", xt[:, column("weakest_member")] > 0),
        ("the beat tracker's tempo agrees", xt[:, column("tracker_agrees")] > 0),
        ("the runner-up a ratio of RATIOS away", xt[:, 5 : 5 + len(RATIOS)].sum(axis=1) > 0),
    ):
        print(
            f"  {name}: {values[wrong].mean():.0%} of the wrong, "
            f"{values[tempo_right].mean():.0%} of the right"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
