"""A step's peak memory traced on the `meta` device (`tunesmith.train.footprint` says how the
estimate uses it). Its own module so that the estimate's cache, read by every build, imports
no torch: a build that changes nothing loads no model library."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class _Live(TorchDispatchMode):
    """Counts the bytes of the storages ops create while they live; `peak` is the most at once.

    A storage is counted from the op that makes it until the last tensor viewing it is
    collected; views of storages made before the trace (weights, inputs) are never counted.
    Written here because torch's own tracker (`torch.distributed._tools.mem_tracker`) hooks
    every parameter's gradient and refuses frozen ones, which is every base weight here.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[int, int] = {}
        self.views: dict[int, int] = {}
        self.now = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {
            t.untyped_storage()._cdata
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor)
        }
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage._cdata
            if key not in self.sizes:
                if key in given:  # a view of a tensor from before the trace
                    continue
                self.sizes[key], self.views[key] = storage.nbytes(), 0
                self.now += storage.nbytes()
                self.peak = max(self.peak, self.now)
            self.views[key] += 1
            weakref.finalize(tensor, self._release, key)
        return out

    def _release(self, key: int) -> None:
        self.views[key] -= 1
        if not self.views[key]:
            self.now -= self.sizes.pop(key)
            del self.views[key]


def _fused_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """`scaled_dot_product_attention` as the fused kernels keep it, for the trace on meta."""
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(repeat, dim=-3)
        value = value.repeat_interleave(repeat, dim=-3)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(
            ~attn_mask, float("-inf")
        )
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )[0]


@contextmanager
def _attention_as_fused() -> Iterator[None]:
    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _fused_attention
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


def traced_peak(step: Callable[[], Any]) -> int:
    """The most bytes the tensors `step()` creates hold at once, `step` run on `meta` tensors
    (a forward, its loss and `backward()`). What `step` returns is dropped before it ends."""
    live = _Live()
    with _attention_as_fused(), live:
        step()
    return live.peak


def parameter_bytes(module: torch.nn.Module, trainable: bool | None = None) -> int:
    """The bytes of a module's parameters and buffers (`trainable`: only those that do, or do
    not, require gradients; buffers count as not trained)."""
    total = 0
    for p in module.parameters():
        if trainable is None or p.requires_grad == trainable:
            total += p.numel() * p.element_size()
    if trainable is not True:
        total += sum(b.numel() * b.element_size() for b in module.buffers())
    return total


def trainable_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
