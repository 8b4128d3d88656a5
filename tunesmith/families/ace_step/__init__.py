"""The `ace-step` family: ACE-Step 1.5 as diffusers ships it, trained as HOT-Step and Side-Step do.

model.py    the checkpoint folder: parts, check (audio codes optional), load
tiny.py     a tiny ACE-Step 1.5 with the real classes, in the published layout
text.py     the text encoder's inputs as ACE-Step 1.5 formats them; the trigger rules
encode.py   audio -> 48 kHz stereo -> Oobleck latents (25 Hz) -> FSQ codes (5 Hz); texts ->
            hidden states; what the DiT reads; one item's files (safetensors + JSON sidecar)

The conventions and their sources: docs/conventions/ace-step.md.
"""
