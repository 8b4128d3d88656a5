import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tunesmith.store.tensors import safetensors_bytes, write_safetensors

WRITER = """
import sys, torch
from tunesmith.store.tensors import write_safetensors
g = torch.Generator().manual_seed(0)
tensors = {f"layer.{i}.lora_A": torch.randn(4, 8, generator=g) for i in range(6)}
meta = {f"tunesmith.key{i}": f"value {i}" for i in range(24)}
write_safetensors(__import__("pathlib").Path(sys.argv[1]), tensors, meta)
"""


@pytest.mark.slow
def test_same_tensors_and_metadata_give_the_same_bytes_in_every_process(tmp_path: Path):
    """safetensors keeps metadata in a per-process-seeded hash map; ours is sorted."""
    paths = [tmp_path / f"{i}.safetensors" for i in range(3)]
    for path in paths:
        subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True)
    assert len({p.read_bytes() for p in paths}) == 1
    with safe_open(str(paths[0]), framework="pt") as f:
        assert f.metadata() == {f"tunesmith.key{i}": f"value {i}" for i in range(24)}
        assert sorted(f.keys()) == sorted(f"layer.{i}.lora_A" for i in range(6))


def test_canonical_file_holds_the_same_tensors_as_the_librarys(tmp_path: Path):
    tensors = {"b": torch.arange(6, dtype=torch.float16).reshape(2, 3), "a": torch.ones(3)}
    path = write_safetensors(tmp_path / "x.safetensors", tensors, {"k": "v"})
    loaded = load_file(path)
    assert set(loaded) == {"a", "b"}
    assert all(torch.equal(loaded[k], tensors[k]) for k in tensors)
    assert loaded["b"].dtype == torch.float16
    header_length = int.from_bytes(path.read_bytes()[:8], "little")
    assert header_length % 8 == 0
    assert safetensors_bytes(tensors, {"k": "v"}) == path.read_bytes()
