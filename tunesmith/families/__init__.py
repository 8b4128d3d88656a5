"""The model families, one package each (`tunesmith/families/<name>/`).

The interface they implement and the registry that finds them live one layer below the
training code, in `tunesmith/family.py`; this package holds the families alone.
"""

import logging


class _TorchvisionNotice(logging.Filter):
    """transformers says, once per class, that an image processor "requires torchvision (not
    installed); falling back to `…Pil`", when `diffusers` merely imports its pipelines (SDXL,
    ACE-Step). The processors tunesmith builds (CLIP's and DINOv2's for the quality measures)
    work in their PIL form, so the notice says nothing a person could act on; the fallback is
    kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "requires torchvision (not installed); falling back" not in record.getMessage()


# Installed where the families (the only importers of diffusers and transformers) are.
logging.getLogger("transformers.utils.import_utils").addFilter(_TorchvisionNotice())
