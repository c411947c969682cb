"""Random number generator state: what a checkpoint saves of every rank, and how a resume restores it.

At the same world size every rank restores its own saved state, so a resumed run continues
exactly (docs/checkpoints.md, "Exact resume"); at another world size the per-rank streams
cannot carry over, and each rank is seeded afresh from (seed, step, rank).
"""

from __future__ import annotations

import random

import torch


def rng_state() -> dict:
    """This process's torch, Python and (where there are GPUs) CUDA generator states."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def cpu_bytes(rng: torch.Tensor) -> torch.Tensor:
    """An RNG state as torch.set_rng_state and torch.cuda.set_rng_state take it: a CPU ByteTensor.

    Issue 11: a checkpoint loaded with map_location=cuda put the saved states on the GPU, and
    set_rng_state raised "RNG state must be a torch.ByteTensor" on every restart. The CUDA
    generators' states are CPU tensors too (torch.cuda.get_rng_state returns one).
    """
    return rng.detach().to(device="cpu").contiguous()


def set_rng_state(state: dict) -> None:
    """Restore what ``rng_state`` returned, wherever torch.load put its tensors."""
    torch.set_rng_state(cpu_bytes(state["torch"]))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        # a node with fewer GPUs than the writer's restores the ones it has
        for index, cuda in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cpu_bytes(cuda), index)


def seed_rank(seed: int, step: int, rank: int) -> None:
    """Distinct streams per rank (dropout), reproducible from (seed, step, rank): a resharded resume's."""
    value = (seed * 1_000_003 + step * 7919 + rank + 1) % (2**63)
    torch.manual_seed(value)
    random.seed(value)
