"""The types of the run settings, and the check of a table against them.

Every field of a family's `[runs.adapter]`, `[runs.train]` and `[[runs.demos]]` dataclasses is
annotated with what it allows, next to its default:

    rank: Count = 16                      # an integer ≥ 1
    cfg_dropout: Share = 0.1              # a number in [0, 1)
    type: Literal["lora", "lokr"] = "lora"
    holdout: Annotated[int, Ge(0)] | None = None   # None: left out of the file

`problems(cls, table, where)` checks each value of a TOML table against its field's annotation
and returns one line per value that does not fit, naming the key, the value and what is
allowed (`allowed` words the same annotation, so a rule is written once). The check is
pydantic's, in strict mode: a string is never read as a number, nor `true` as 1, and NaN and
infinity are no numbers. pydantic rather than msgspec because it is already installed (Dagster
depends on it) and it validates a single annotated value (`TypeAdapter`) with the
`annotated_types` constraints the fields carry, so the sections stay plain frozen dataclasses.
Checks across fields (LoKr's lr with its accumulation, the processes of a several-GPU run)
stay with the family (`ConfigSections.check`).
"""

from __future__ import annotations

import difflib
import functools
import json
import types
import typing
from dataclasses import fields
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Interval, Le, Lt, MinLen, MultipleOf
from pydantic import AllowInfNan, TypeAdapter, ValidationError

Number = Annotated[float, AllowInfNan(False)]  # an int is a number too; NaN and inf are not
Positive = Annotated[Number, Gt(0)]
NonNegative = Annotated[Number, Ge(0)]
Share = Annotated[Number, Interval(ge=0, lt=1)]  # a probability that must leave some room
Fraction = Annotated[Number, Interval(ge=0, le=1)]
Count = Annotated[int, Ge(1)]
Whole = Annotated[int, Ge(0)]
Seed = Whole  # numpy's generators take no negative seed

__all__ = [
    "Count",
    "Fraction",
    "Ge",
    "Gt",
    "Interval",
    "Le",
    "Literal",
    "MultipleOf",
    "NonNegative",
    "Number",
    "Positive",
    "Seed",
    "Share",
    "Whole",
    "allowed",
    "problems",
]


def problems(cls: type, table: dict[str, Any], where: str, section: str) -> list[str]:
    """One line per key of `table` (the TOML table `section`) that is no field of `cls`, or
    whose value its field's annotation does not allow: `where` (the file and the run), the key,
    the value and what is allowed."""
    checks = _checks(cls)
    found = []
    for key, value in table.items():
        if key not in checks:
            close = difflib.get_close_matches(key, checks, n=1)
            guess = f"did you mean {close[0]}? " if close else ""
            found.append(
                f"{where}: {section}.{key} is not a setting; {guess}the {_singular(section)} "
                f"settings are {', '.join(sorted(checks))}"
            )
            continue
        hint, adapter = checks[key]
        try:
            adapter.validate_python(_frozen(value), strict=True)
        except ValidationError:
            found.append(f"{where}: {section}.{key} = {toml_text(value)}: must be {allowed(hint)}")
    return found


def _frozen(value: Any) -> Any:
    """A TOML array as the tuple its field holds."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


@functools.cache
def _checks(cls: type) -> dict[str, tuple[Any, TypeAdapter]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: (hints[f.name], TypeAdapter(hints[f.name])) for f in fields(cls)}


def _singular(section: str) -> str:  # "demos[2]" → "demo"
    return section.split("[")[0].removesuffix("s")


def allowed(hint: Any) -> str:
    """What an annotation allows, in words: "an integer ≥ 1", "one of "lora", "lokr""."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        bounds = [w for constraint in args[1:] for w in _constraint(constraint)]
        return " ".join([allowed(args[0]), " and ".join(bounds)]).strip()
    if origin in (typing.Union, types.UnionType):
        given = [allowed(a) for a in args if a is not type(None)]  # None: the key left out
        return " or ".join(given)
    if origin is Literal:
        return args and (
            toml_text(args[0])
            if len(args) == 1
            else "one of " + ", ".join(toml_text(a) for a in args)
        )
    if origin is dict:  # a TOML table: {style = 0.7, prompt = 0.3}
        keys = typing.get_args(args[0]) if typing.get_origin(args[0]) is Literal else ()
        named = ", ".join(toml_text(k) for k in keys) if keys else allowed(args[0])
        return f"a table of weights ({named}: {allowed(args[1])})"
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(allowed(args[0]))}"
        if len(set(args)) == 1:
            return f"a list of {len(args)} {_plural(allowed(args[0]))}"
        return "a list of " + ", ".join(allowed(a) for a in args)
    return _NAMES.get(hint, getattr(hint, "__name__", str(hint)))


_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _constraint(constraint: Any) -> list[str]:
    if isinstance(constraint, Interval):
        low = "[" if constraint.ge is not None else "("
        high = "]" if constraint.le is not None else ")"
        a = constraint.ge if constraint.ge is not None else constraint.gt
        b = constraint.le if constraint.le is not None else constraint.lt
        return [f"in {low}{a:g}, {b:g}{high}"]
    for kind, sign in ((Ge, "≥"), (Gt, ">"), (Le, "≤"), (Lt, "<")):
        if isinstance(constraint, kind):
            return [f"{sign} {getattr(constraint, kind.__name__.lower()):g}"]
    if isinstance(constraint, MultipleOf):
        return [f"a multiple of {constraint.multiple_of:g}"]
    if isinstance(constraint, MinLen):
        return [f"with at least {constraint.min_length} key(s)"]
    return []  # AllowInfNan: part of what "a number" means


def _plural(words: str) -> str:
    plurals = (("an integer", "integers"), ("a number", "numbers"), ("a string", "strings"))
    for single, many in plurals:
        if words.startswith(single):
            return many + words[len(single) :]
    return words


def toml_text(value: Any) -> str:
    """A value as it reads in a TOML file: "fast", true, [0.9, 2]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_text(v)}" for k, v in value.items()) + "}"
    return repr(value)
