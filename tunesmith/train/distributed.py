"""Data-parallel training on several processes: the pieces a torch trainer and the loop use.

A run with `train.devices` × `train.nodes` > 1 is launched under torchrun
(`pipelines.train_child`); each process is one rank of a `torch.distributed` group (gloo on
the CPU, NCCL on CUDA). Every rank draws the whole global batch from the same generators as
the one-process run (the same draws on every rank), keeps items `rank::world` of it, and
`DistributedDataParallel` sums the adapter gradients over the ranks during backward. Rank
0 writes every file, the state and the events, and measures validation; the others train.

The loss a rank backpropagates is its share of the global batch's loss scaled by the world
size (`global_share`), so DDP's mean over ranks is the gradient of the one-process loss over
the whole batch, also where the batch does not divide evenly. The numbers are the
one-process run's up to rounding: the batch's sum is taken in another order (per rank, then
over ranks), so they agree to about 1e-6 relative in float32, not bit for bit.

With one process nothing here runs: `rank_and_world()` is (0, 1) and the trainers take
their one-process path, byte for byte as before.

On MLX the ranks are started by `mlx.launch` (its ring backend, one machine) and join its
group with `start_mlx`; `rank_and_world`, `any_rank` and `stop` then answer for that group,
and the MLX trainer averages its gradients over it (`nn.average_gradients`). The shares and
their weights are the same rules (`weighted_share`). mlx is imported only there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

T = TypeVar("T")
# Rank 0 measures validation and renders samples while the others wait in the next step's
# all-reduce: the group's timeout must outlast the longest of those.
TIMEOUT = timedelta(hours=2)
_mlx_group: Any = None  # this process's MLX group, where mlx.launch started it as one rank


def start_mlx() -> Any:
    """Join the ring group mlx.launch set up (its environment: MLX_RANK, MLX_HOSTFILE)."""
    import mlx.core as mx

    global _mlx_group
    _mlx_group = mx.distributed.init(strict=True, backend="ring")
    return _mlx_group


def mlx_group() -> Any:
    """This rank's MLX group; None outside mlx.launch (one process)."""
    return _mlx_group


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of this process; (0, 1) outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if _mlx_group is not None:
        return _mlx_group.rank(), _mlx_group.size()
    return 0, 1


def is_main() -> bool:
    return rank_and_world()[0] == 0


def start(device: str) -> str:
    """Join the process group torchrun set up (its environment); returns this rank's device:
    `cuda:<local rank>` on CUDA (NCCL), else `device` (gloo)."""
    cuda = device.startswith("cuda")
    if cuda:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT)
    return device


def stop() -> None:
    global _mlx_group
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _mlx_group = None  # MLX has no call to leave a group: its sockets close with the process


def share(items: Sequence[T] | torch.Tensor, rank: int, world: int) -> Any:
    """This rank's items of a global batch: `rank::world` (along dim 0 for a tensor)."""
    return items[rank::world]


def weighted_share(count: int, rank: int, world: int) -> tuple[list[int], list[float]]:
    """This rank's items of a global batch of `count` (`rank::world`) and the weight of each
    in the loss it backpropagates: `world / count`, as `global_share` (the mean over the global
    batch, times the world size an average over the ranks divides by). A rank with no item of
    a short batch takes item 0 at weight 0, so it still joins the all-reduce."""
    mine = list(range(rank, count, world))
    if not mine:
        return [0], [0.0]
    return mine, [world / count] * len(mine)


def global_share(local_sum: torch.Tensor, count: int, world: int) -> torch.Tensor:
    """What a rank backpropagates: its part of the global mean, times the world size, since
    DDP divides the summed gradients by the world size."""
    return local_sum / count * world


def global_sum(value: torch.Tensor) -> float:
    """The sum over ranks of a scalar (in float64): the global batch's loss from the shares."""
    total = value.detach().to(torch.float64).reshape(1).clone()
    dist.all_reduce(total)
    return total.item()


def any_rank(flag: bool, device: str = "cpu") -> bool:
    """True where `flag` is true on any rank (each rank passes its own)."""
    if _mlx_group is not None:
        import mlx.core as mx

        return bool(mx.distributed.all_max(mx.array([int(flag)]), group=_mlx_group).item())
    value = torch.tensor([int(bool(flag))], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class _Forward(nn.Module):
    """The module DDP wraps: the adapted model(s) as children, so DDP sees the adapter
    parameters, and the family's loss function as the forward."""

    def __init__(self, modules: dict[str, nn.Module], forward: Callable[..., torch.Tensor]):
        super().__init__()
        self.parts = nn.ModuleDict(modules)
        self.function = forward

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.function(*args, **kwargs)


def replicate(modules: dict[str, nn.Module], forward: Callable[..., torch.Tensor]) -> nn.Module:
    """`DistributedDataParallel` over the adapter inside `modules`, calling `forward` (the
    family's loss on a rank's share) as its forward; backward through its output all-reduces
    the adapter gradients. The frozen base is left out of DDP's start-up broadcast (every rank
    loads the same base model), and there are no buffers to keep in step."""
    wrapper = _Forward(modules, forward)
    frozen = [name for name, p in wrapper.named_parameters() if not p.requires_grad]
    frozen += [name for name, _ in wrapper.named_buffers()]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(wrapper, frozen)
    return DistributedDataParallel(wrapper, forward_sync_buffers=False)
