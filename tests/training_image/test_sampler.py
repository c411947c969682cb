"""The elastic sampler: one global order, resharded at any world size."""

from __future__ import annotations

import pytest
from elastic_trainer.data.sampler import ElasticBatchSampler, rank_slice

N, B = 100, 12  # 8 steps per epoch, 4 samples dropped per epoch


def global_batch(step: int, world: int) -> list[int]:
    return [i for rank in range(world) for i in ElasticBatchSampler(N, B, rank, world, seed=3).batch(step)]


@pytest.mark.parametrize("world", [1, 2, 3, 5, 12])
def test_ranks_split_the_same_global_batch(world):
    for step in range(20):
        assert global_batch(step, world) == global_batch(step, 1)
    sizes = [len(ElasticBatchSampler(N, B, r, world, seed=3).batch(0)) for r in range(world)]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == B


def test_an_epoch_visits_each_sample_at_most_once_across_a_membership_change():
    seen = [i for step in range(3) for i in global_batch(step, 2)]
    seen += [i for step in range(3, 8) for i in global_batch(step, 3)]  # a node joined at step 3
    assert len(seen) == len(set(seen)) == 8 * B


def test_epochs_reshuffle_and_the_order_depends_on_the_seed():
    assert global_batch(0, 1) != global_batch(8, 1)  # epoch 1 starts at step 8
    assert ElasticBatchSampler(N, B, 0, 1, seed=3).batch(0) != ElasticBatchSampler(N, B, 0, 1, seed=4).batch(0)


def test_state_round_trip():
    sampler = ElasticBatchSampler(N, B, 0, 1, seed=3)
    state = sampler.state_dict(19)
    assert state == {"epoch": 2, "position": 3 * B, "global_batch": B, "seed": 3}
    assert ElasticBatchSampler.step_from_state(state, N) == 19


def test_iteration_resumes_at_the_start_step():
    full = list(ElasticBatchSampler(N, B, 1, 2, seed=3, total_steps=10))
    resumed = ElasticBatchSampler(N, B, 1, 2, seed=3, start_step=6, total_steps=10)
    assert list(resumed) == full[6:] and len(resumed) == 4


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="smaller than the world size"):
        rank_slice(2, 0, 3)
    with pytest.raises(ValueError, match="smaller than one global batch"):
        ElasticBatchSampler(5, 8, 0, 1, seed=0)
