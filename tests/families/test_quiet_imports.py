"""Loading a family's diffusers pipeline prints nothing a person cannot act on: transformers'
notice that its image processors fall back without torchvision is filtered at its logger."""

from __future__ import annotations

import subprocess
import sys


def test_loading_the_families_prints_no_torchvision_notice():
    code = (
        "import tunesmith.families.sdxl.model, tunesmith.families.ace_step\n"
        "from diffusers import StableDiffusionXLPipeline\n"
        "from transformers import CLIPImageProcessor\n"
        "print(CLIPImageProcessor.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "torchvision" not in done.stderr, done.stderr
    assert done.stdout.strip() == "CLIPImageProcessorPil"  # the fallback itself is kept
