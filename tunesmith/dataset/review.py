"""The review table: label values a person should look at, as the labels stage lists them.

An entry (report.json `stages.labels.review`) names the item, the field, the value used and
its source, what the analysis found and its confidence, and why it is listed: a measured
value under the confidence floor (shown with the alternatives the analysis weighed: "86,
or 172" for a bpm), an assumed one, or a written value the audio contradicts. The same table is
shown in the stage's Dagster metadata and by `tunesmith status DATASET --review`.
"""

from __future__ import annotations

from typing import Any

HEADER = ("file", "field", "value", "source", "analysis", "confidence", "why")


def rows(review: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One tuple of strings per entry, in HEADER's order."""
    return [
        (
            str(entry["path"]),
            str(entry["field"]),
            _with_alternatives(entry),
            str(entry.get("source", "")),
            _show(entry.get("analysis")),
            "" if entry.get("confidence") is None else f"{entry['confidence']:.2f}",
            str(entry.get("reason", "")),
        )
        for entry in review
    ]


def markdown(review: list[dict[str, Any]]) -> str:
    if not review:
        return "nothing to review"
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows(review):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines)


def text(review: list[dict[str, Any]]) -> str:
    """A plain table for a terminal, columns padded to their widest cell."""
    if not review:
        return "nothing to review"
    table = [HEADER, *rows(review)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


def ignored_markdown(ignored: list[dict[str, str]]) -> str:
    if not ignored:
        return "none"
    lines = ["| file | reason |", "|---|---|"]
    lines += [f"| `{i['path']}` | {i['reason']} |" for i in ignored]
    return "\n".join(lines)


def _with_alternatives(entry: dict[str, Any]) -> str:
    """The value, and the others the analysis weighed: "86, or 172"."""
    shown = _show(entry.get("value"))
    others = [_show(value) for value in entry.get("alternatives") or []]
    return ", or ".join([shown, *others]) if others else shown


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}" if value.is_integer() else f"{value:.1f}"
    return str(value)
