"""The validation-loss curve as a small PNG: base point, each measurement, the best marked."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw


def loss_curve_png(
    history: list[dict], best_step: int, width: int = 420, height: int = 180
) -> bytes:
    """PNG bytes of validation loss against step; `history` is [{"step", "loss"}], base first."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    pad = 28
    steps = [h["step"] for h in history]
    losses = [h["loss"] for h in history]
    lo, hi = min(losses), max(losses)
    span_x, span_y = max(max(steps), 1), (hi - lo) or 1.0

    def xy(step: float, loss: float) -> tuple[float, float]:
        x = pad + (width - 2 * pad) * step / span_x
        y = pad + (height - 2 * pad) * (hi - loss) / span_y
        return x, y

    draw.rectangle([pad, pad, width - pad, height - pad], outline=(200, 200, 200))
    base_y = xy(0, losses[0])[1]
    draw.line([(pad, base_y), (width - pad, base_y)], fill=(180, 180, 180), width=1)
    points = [xy(s, v) for s, v in zip(steps, losses, strict=True)]
    if len(points) > 1:
        draw.line(points, fill=(40, 90, 200), width=2)
    for (x, y), step in zip(points, steps, strict=True):
        colour = (220, 60, 40) if step == best_step else (40, 90, 200)
        r = 5 if step == best_step else 3
        draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
    draw.text(
        (pad, 6), f"validation loss: base {losses[0]:.4f}, best {min(losses):.4f}", fill="black"
    )
    draw.text((pad, height - pad + 6), f"step 0 … {max(steps)}", fill=(90, 90, 90))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
