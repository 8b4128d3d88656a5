"""No `tunesmith.toml` a person writes shows them a traceback.

Hypothesis writes files with mistakes in them (wrong types, numbers out of range, unknown keys
and families, tables that are not tables, extra tables) into a dataset, and `tunesmith check`
and `tunesmith run` read each: both exit 1, every mistake is named on a line of their output,
nothing is built. The wrong values are chosen from each setting's annotation by this test's own
reading of it (another type than the field's, a number past its bound), not by the schema's
check.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import types
import typing
from dataclasses import fields
from typing import Annotated, Any, Literal

import pytest
from annotated_types import Ge, Gt, Interval, Le, Lt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.cli import main
from tests.conftest import write_clip
from tunesmith import family as families

FAMILIES = families.all_families()
TOML_NAME = "tunesmith.toml"


# --- what a field allows, read from its annotation ---------------------------------------------


def base_types(hint: Any) -> set[type]:
    """The TOML value types a field takes: int, float, str, bool, tuple (a TOML array)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return base_types(args[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(base_types(a) for a in args if a is not type(None)))
    if origin is Literal:
        return {type(a) for a in args}
    if origin is tuple:
        return {tuple}
    return {hint}


def bounds(hint: Any) -> list[Any]:
    """Values just past each bound of a numeric field (None when it has none)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return [v for a in args if a is not type(None) for v in bounds(a)]
    if origin is not Annotated:
        return []
    base, past = base_types(args[0]), []
    for c in args[1:]:
        if isinstance(c, Interval):
            past += [v for v in (c.ge, c.gt) if v is not None]  # gt itself is out; ge-1 below
            past += [c.ge - 1] if c.ge is not None else []
            past += [c.le + 1] if c.le is not None else []
            past += [c.lt] if c.lt is not None else []
            past = [p for p in past if not (c.ge is not None and p == c.ge)]
        elif isinstance(c, Ge):
            past.append(c.ge - 1)
        elif isinstance(c, Gt):
            past.append(c.gt)
        elif isinstance(c, Le):
            past.append(c.le + 1)
        elif isinstance(c, Lt):
            past.append(c.lt)
    if float in base:
        past += [math.nan, math.inf]
    return [int(p) if base == {int} and float(p).is_integer() else p for p in past]


def sections(family: str) -> dict[str, type]:
    config = FAMILIES[family].config
    return {"adapter": config.adapter, "train": config.train, "demos": config.demo}


def hints(cls: type) -> dict[str, Any]:
    found = typing.get_type_hints(cls, include_extras=True)
    return {f.name: found[f.name] for f in fields(cls)}


def TEXT(**size) -> st.SearchStrategy[str]:
    return st.text(alphabet=st.characters(codec="utf-8"), **size)


OTHER_TYPE = {
    int: st.one_of(TEXT(max_size=8), st.booleans(), st.floats(0.1, 0.9), st.just([1])),
    float: st.one_of(TEXT(max_size=8), st.booleans(), st.just([0.5]), st.just({"a": 1})),
    str: st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.just(["a"])),
    bool: st.one_of(st.integers(), TEXT(max_size=8), st.floats(allow_nan=False)),
    tuple: st.one_of(TEXT(max_size=8), st.integers(), st.just({"a": 1})),
}


@st.composite
def wrong_value(draw, hint: Any) -> Any:
    """A value the field cannot take: of no type it takes, past a bound, or not on its list."""
    taken = base_types(hint)
    candidates = [
        OTHER_TYPE[kind].filter(lambda v: not _fits_type(v, taken))
        for kind in taken
        if kind in OTHER_TYPE
    ]
    past = bounds(hint)
    if past:
        candidates.append(st.sampled_from(past))
    literal = _literal(hint)
    if literal:
        candidates.append(TEXT(min_size=1, max_size=6).filter(lambda v: v not in literal))
    return draw(st.one_of(*candidates))


def _fits_type(value: Any, taken: set[type]) -> bool:
    if isinstance(value, bool):
        return bool in taken
    if isinstance(value, int):
        return int in taken or float in taken
    if isinstance(value, float):
        return float in taken
    if isinstance(value, list):
        return tuple in taken
    return type(value) in taken


def _literal(hint: Any) -> tuple:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return args
    if origin in (typing.Union, types.UnionType, Annotated):
        return tuple(v for a in args for v in _literal(a))
    return ()


KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10)


@st.composite
def mistake(draw, family: str) -> tuple[str, Any, str]:
    """(where in the run: section or "" for the run itself, the edit, what the output must
    name) for one mistake in a run of `family`."""
    kind = draw(st.sampled_from(["value", "value", "value", "key", "table", "family", "top"]))
    if kind in ("value", "key"):
        section = draw(st.sampled_from(["adapter", "train", "demos"]))
        known = hints(sections(family)[section])
        if kind == "key":
            key = draw(KEY.filter(lambda k: k not in known))
            value = draw(st.one_of(st.integers(), TEXT(max_size=5)))
        else:
            key = draw(st.sampled_from(sorted(known)))
            value = draw(wrong_value(known[key]))
        named = f"{'demos[1]' if section == 'demos' else section}.{key}"
        return section, {key: value}, named
    if kind == "table":
        section = draw(st.sampled_from(["adapter", "train", "demos"]))
        return "", {section: draw(st.one_of(st.integers(), TEXT(max_size=5)))}, section
    if kind == "family":
        name = draw(KEY.filter(lambda k: k not in FAMILIES))
        return "", {"family": name}, "family = "
    key = draw(KEY.filter(lambda k: k not in ("name", "family", "base_model", "trigger")))
    return "", {key: draw(st.integers())}, key


@st.composite
def document(draw) -> tuple[dict, list[str]]:
    """A tunesmith.toml with one to three runs, each with one or two mistakes, sometimes a
    bad [dataset] or an extra table; and what the output must name."""
    runs, named = [], []
    for index in range(draw(st.integers(1, 3))):
        family = draw(st.sampled_from(sorted(FAMILIES)))
        run: dict[str, Any] = {"name": f"run{index}", "family": family}
        run.update({"adapter": {}, "train": {}, "demos": [{}]})
        mine = []
        for _ in range(draw(st.integers(1, 2))):
            section, edit, says = draw(mistake(family))
            target = run if not section else run.get(section)
            target = target[0] if isinstance(target, list) and target else target
            if isinstance(target, dict):  # not a table an earlier mistake replaced
                target.update(edit)
                replaced = [k for k in edit if not section and k in ("adapter", "train", "demos")]
                mine = [m for m in mine if not any(m.startswith(k) for k in replaced)]
                mine.append(says)
        if run["family"] != family:  # a family nobody knows: its settings cannot be checked
            mine = ["family = "]
        named += mine
        runs.append(run)
    doc: dict[str, Any] = {"runs": runs}
    extra = draw(st.sampled_from(["", "dataset", "table"]))
    if extra == "dataset":
        doc["dataset"] = {"genre_ratio": draw(st.one_of(TEXT(max_size=4), st.just(200)))}
        named.append("genre_ratio")
    elif extra == "table":
        name = draw(KEY.filter(lambda k: k not in ("runs", "dataset")))
        doc[name] = {"x": 1}
        named.append(f"[{name}]")
    return doc, named


# --- TOML --------------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML: no DEL
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_text(doc: dict[str, Any]) -> str:
    lines = []
    for name, table in doc.items():
        for entry in table if isinstance(table, list) else [table]:
            lines.append(f"[[{name}]]" if isinstance(table, list) else f"[{name}]")
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


# --- the commands -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    env = {
        "TUNESMITH_DATASETS": root / "datasets",
        "TUNESMITH_OUT": root / "out",
        "TUNESMITH_STORE": root / "store",
        "TUNESMITH_MODELS": root / "models",
        "DAGSTER_HOME": root / "home",
    }
    for path in env.values():
        path.mkdir()
    write_clip(root / "datasets" / "mixed" / "clip.wav", seconds=1.0)
    before = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    yield root
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def command(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same files in every CI run
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=document())
def test_a_file_with_mistakes_is_refused_line_by_line_and_builds_nothing(roots, case):
    doc, named = case
    (roots / "datasets" / "mixed" / TOML_NAME).write_text(toml_text(doc), encoding="utf-8")
    for argv in (("check", "mixed"), ("run", "mixed")):
        code, out = command(*argv)
        assert code == 1, out
        assert "Traceback" not in out, out
        for says in named:
            assert says in out, (says, out)
    built = [p for p in (roots / "out").rglob("*")] + [p for p in (roots / "store").rglob("*")]
    assert not built, built
    assert not list((roots / "home").iterdir())  # no Dagster run was started


def test_the_writer_writes_toml_tomllib_reads_back():
    import tomllib

    doc = {
        "runs": [{"name": "a", "train": {"lr": math.inf, "betas": [0.1, "x"]}, "demos": [{}]}],
        "dataset": {"genre_ratio": "many"},
    }
    read = tomllib.loads(toml_text(doc))
    assert read["runs"][0]["train"]["lr"] == math.inf and read["dataset"] == doc["dataset"]


def test_the_test_reads_bounds_and_types_from_the_annotations():
    from tunesmith.families.stable_audio_3.config import Sa3Train

    train = hints(Sa3Train)
    assert base_types(train["lr"]) == {float} and 0 in bounds(train["lr"])
    assert 1 in bounds(train["cfg_dropout"]) and -1 in bounds(train["cfg_dropout"])
    assert base_types(train["timestep_sampler"]) == {str}
    assert base_types(train["holdout"]) == {int} and -1 in bounds(train["holdout"])
