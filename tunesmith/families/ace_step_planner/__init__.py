"""ACE-Step 1.5's planner LM ("5 Hz LM"): adapters trained on a dataset's audio codes.

tiny.py            a tiny planner (Qwen3ForCausalLM + a tokenizer with the code tokens)
model.py           a planner folder: checks, loading, its code vocabulary, codes that fit
data.py            an item's labels and codes as a prompt and a masked answer
torch_lm.py        the LoRA objective on PyTorch (PEFT)
mlx_lm_backend.py  the same objective on MLX (mlx-lm's Qwen3, LoRA layers and loss)
adapter_files.py   the two adapter folders (PEFT, mlx-lm), their trigger and lineage metadata
audition.py        plans with and without an adapter, decoded without the DiT or through it
trainer.py         a planner run as a trainer of the one loop on PyTorch (PEFT); its files
mlx_trainer.py     the same run on MLX (mlx-lm), chosen by placement
render.py          the renders stage's pure-LM audition pairs, with each plan's details

The conventions and their sources: docs/conventions/ace-step-planner.md.
"""
