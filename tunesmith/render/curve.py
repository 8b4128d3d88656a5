"""A value per training step drawn two ways: the validation loss, or a quality measure.

`curve_svg` is the audition page's inline SVG (ticks at round values, the base model's point
at step 0 hollow, every checkpoint a dot, the kept one ringed and labelled, and optionally a
dashed reference line such as the Fréchet distance's floor); `curve_png` is the small picture
the Dagster UI shows in the auditions asset's metadata (Markdown takes an image, not an SVG
element). Both take `points` as [(step, value)], the base model first.
"""

from __future__ import annotations

import html
import io
import math

SVG_WIDTH, SVG_HEIGHT = 640, 260
MARGIN = {"left": 64, "right": 24, "top": 28, "bottom": 44}


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten."""
    raw = (hi - lo) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    for i in range(count + 2):
        tick = first + i * step
        ticks.append(round(tick, 12))
        if tick >= hi:
            break
    return ticks


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _svg_text(x: float, y: float, text: str, cls: str, anchor: str) -> str:
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{_esc(text)}</text>'


def curve_svg(
    points: list[tuple[int, float]],
    kept: tuple[int, float] | None,
    *,
    label: str,
    title: str,
    kept_label: str = "best",
    reference: tuple[float, str] | None = None,
    css_class: str = "loss",
) -> str:
    """An inline SVG of `points` (the first is the base model's) with `kept` (step, value)
    ringed and labelled "<kept_label> · step N · value"; `label` names the y axis, `title` is
    the picture's accessible name, `reference` (value, words) a dashed horizontal line."""
    steps = [s for s, _ in points] + ([kept[0]] if kept else [])
    values = [v for _, v in points] + ([kept[1]] if kept else [])
    values += [reference[0]] if reference else []
    x_ticks = nice_ticks(min(steps), max(max(steps), min(steps) + 1))
    # room below the lowest point for the kept point's label
    pad = max((max(values) - min(values)) * 0.15, abs(max(values)) * 0.05, 1e-6)
    y_ticks = nice_ticks(min(values) - pad, max(values) + pad)
    x0, x1 = MARGIN["left"], SVG_WIDTH - MARGIN["right"]
    y0, y1 = SVG_HEIGHT - MARGIN["bottom"], MARGIN["top"]

    def x(step: float) -> float:
        return x0 + (step - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * (x1 - x0)

    def y(value: float) -> float:
        return y0 + (value - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * (y1 - y0)

    out = [
        f'<svg class="{_esc(css_class)}" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" role="img" '
        f'aria-label="{_esc(title)}">'
    ]
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
        out.append(_svg_text(x0 - 12, y(t) + 4, f"{t:g}", "tick", "end"))
    for t in x_ticks:
        out.append(_svg_text(x(t), y0 + 18, f"{t:g}", "tick", "middle"))
    out.append(f'<line class="axis" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    out.append(_svg_text((x0 + x1) / 2, SVG_HEIGHT - 6, "training step", "axis-label", "middle"))
    out.append(_svg_text(x0, y1 - 12, label, "axis-label", "start"))
    if reference:
        ry = y(reference[0])
        out.append(f'<line class="reference" x1="{x0}" x2="{x1}" y1="{ry:.1f}" y2="{ry:.1f}"/>')
        out.append(_svg_text(x1 - 4, ry - 6, reference[1], "note reference-label", "end"))
    path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in sorted(points))
    out.append(f'<polyline class="curve" points="{path}"/>')
    for i, (s, v) in enumerate(points):
        kind = "base" if i == 0 else "point"
        out.append(
            f'<circle class="{kind}" cx="{x(s):.1f}" cy="{y(v):.1f}" r="{4 if i == 0 else 3}">'
            f"<title>{'base model' if i == 0 else f'step {s}'}: {_esc(label)} {v:.4g}</title>"
            "</circle>"
        )
    if points:
        s, v = points[0]
        out.append(_svg_text(x(s) + 8, y(v) - 8, "base", "note", "start"))
    if kept:
        kx, ky = x(kept[0]), y(kept[1])
        anchor = "end" if kx > (x0 + x1) / 2 else "start"
        text = f"{kept_label} · step {kept[0]} · {kept[1]:.4g}"
        out.append(f'<circle class="best" cx="{kx:.1f}" cy="{ky:.1f}" r="6"/>')
        out.append(
            _svg_text(kx + (-4 if anchor == "end" else 4), ky + 20, text, "note best-label", anchor)
        )
    out.append("</svg>")
    return "".join(out)


def curve_png(
    points: list[tuple[int, float]],
    kept_step: int | None,
    title: str,
    width: int = 420,
    height: int = 180,
) -> bytes:
    """PNG bytes of `points` against step, the base model's level as a grey line and the kept
    step's point in red; `title` is written above it."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    pad = 28
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    lo, hi = min(values), max(values)
    span_x, span_y = max(max(steps), 1), (hi - lo) or 1.0

    def xy(step: float, value: float) -> tuple[float, float]:
        x = pad + (width - 2 * pad) * step / span_x
        y = pad + (height - 2 * pad) * (hi - value) / span_y
        return x, y

    draw.rectangle([pad, pad, width - pad, height - pad], outline=(200, 200, 200))
    base_y = xy(0, values[0])[1]
    draw.line([(pad, base_y), (width - pad, base_y)], fill=(180, 180, 180), width=1)
    drawn = [xy(s, v) for s, v in points]
    if len(drawn) > 1:
        draw.line(drawn, fill=(40, 90, 200), width=2)
    for (x, y), step in zip(drawn, steps, strict=True):
        colour = (220, 60, 40) if step == kept_step else (40, 90, 200)
        r = 5 if step == kept_step else 3
        draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
    draw.text((pad, 6), title, fill="black")
    draw.text((pad, height - pad + 6), f"step 0 … {max(steps)}", fill=(90, 90, 90))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def loss_curve_png(
    history: list[dict], best_step: int, width: int = 420, height: int = 180
) -> bytes:
    """PNG bytes of validation loss against step; `history` is [{"step", "loss"}], base first."""
    points = [(h["step"], h["loss"]) for h in history]
    losses = [v for _, v in points]
    title = f"validation loss: base {losses[0]:.4f}, best {min(losses):.4f}"
    return curve_png(points, best_step, title, width, height)
