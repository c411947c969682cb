"""Small object collectives that need neither numpy nor a CUDA-aware pickle.

``torch.distributed.broadcast_object_list`` converts through ``tensor.numpy()``, and numpy is
not a dependency of the image's library (the CPU CI environment does not have it). Objects
here are tiny (a checkpoint choice, RNG states), so a byte tensor is plenty.
"""

from __future__ import annotations

import pickle

import torch
import torch.distributed as dist


def _to_tensor(obj: object, device: torch.device) -> torch.Tensor:
    data = pickle.dumps(obj)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)


def _from_tensor(tensor: torch.Tensor, size: int) -> object:
    # our own pickles, produced by our own ranks in this job
    return pickle.loads(bytes(tensor[:size].cpu().tolist()))  # noqa: S301


def broadcast_object(obj: object, device: torch.device, src: int = 0) -> object:
    payload = _to_tensor(obj, device) if dist.get_rank() == src else None
    size = torch.tensor([payload.numel() if payload is not None else 0], dtype=torch.int64, device=device)
    dist.broadcast(size, src)
    if payload is None:
        payload = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    dist.broadcast(payload, src)
    return _from_tensor(payload, int(size.item()))


def all_gather_objects(obj: object, device: torch.device) -> list[object]:
    payload = _to_tensor(obj, device)
    world = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([payload.numel()], dtype=torch.int64, device=device))
    longest = max(int(s.item()) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: payload.numel()] = payload
    gathered = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return [_from_tensor(t, int(s.item())) for t, s in zip(gathered, sizes, strict=True)]
