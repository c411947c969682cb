"""One global data order, resharded at any world size.

Training is counted in global steps of a fixed *global* batch. Epoch ``e`` visits the
dataset in the order ``randperm(len, seed + e)``; global step ``s`` of that epoch consumes
positions ``[s * B, (s + 1) * B)`` of it. Each rank takes a contiguous slice of that global
batch. The order does not depend on the world size, so after a membership change the
remaining samples are resharded over the new ranks and no sample is seen twice or skipped
within an epoch. The state is just ``(epoch, position)``, saved in every checkpoint.
The tail of an epoch shorter than one global batch is dropped (as ``drop_last=True``).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def rank_slice(global_batch: int, rank: int, world_size: int) -> tuple[int, int]:
    """Bounds of ``rank``'s share of a global batch; shares differ by at most one sample."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")
    if global_batch < world_size:
        raise ValueError(f"global batch {global_batch} is smaller than the world size {world_size}")
    return global_batch * rank // world_size, global_batch * (rank + 1) // world_size


class ElasticBatchSampler:
    """Yields this rank's index lists, one per global step, from ``start_step`` on.

    Usable as a ``DataLoader(batch_sampler=...)``; its position is owned by the trainer's step
    counter, so prefetching data-loader workers never advance the saved state.
    """

    def __init__(
        self, dataset_len: int, global_batch: int, rank: int, world_size: int, seed: int, start_step: int = 0,
        total_steps: int | None = None,
    ) -> None:
        if dataset_len < global_batch:
            raise ValueError(f"dataset of {dataset_len} samples is smaller than one global batch ({global_batch})")
        self.dataset_len = dataset_len
        self.global_batch = global_batch
        self.rank, self.world_size = rank, world_size
        self.lo, self.hi = rank_slice(global_batch, rank, world_size)
        self.seed = seed
        self.start_step = start_step
        self.total_steps = total_steps
        self._perm_epoch: int | None = None
        self._perm: torch.Tensor | None = None

    @property
    def steps_per_epoch(self) -> int:
        return self.dataset_len // self.global_batch

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, samples consumed in that epoch) before global step ``step`` runs."""
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        return epoch, in_epoch * self.global_batch

    def state_dict(self, step: int) -> dict[str, int]:
        epoch, position = self.position(step)
        return {"epoch": epoch, "position": position, "global_batch": self.global_batch, "seed": self.seed}

    @staticmethod
    def step_from_state(state: dict[str, int], dataset_len: int) -> int:
        """Inverse of ``state_dict``: the global step to resume at (checks the data order matches)."""
        steps_per_epoch = dataset_len // state["global_batch"]
        epoch, position = state["epoch"], state["position"]
        if position % state["global_batch"]:
            raise ValueError(f"sampler position {position} is not on a global-batch boundary")
        return epoch * steps_per_epoch + position // state["global_batch"]

    def permutation(self, epoch: int) -> torch.Tensor:
        if self._perm_epoch != epoch:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            self._perm = torch.randperm(self.dataset_len, generator=generator)
            self._perm_epoch = epoch
        assert self._perm is not None
        return self._perm

    def batch(self, step: int) -> list[int]:
        epoch, position = self.position(step)
        perm = self.permutation(epoch)
        return perm[position + self.lo : position + self.hi].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        step = self.start_step
        while self.total_steps is None or step < self.total_steps:
            yield self.batch(step)
            step += 1

    def __len__(self) -> int:
        if self.total_steps is None:
            raise TypeError("unbounded sampler has no length")
        return max(0, self.total_steps - self.start_step)
