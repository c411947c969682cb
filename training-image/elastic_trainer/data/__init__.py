"""Data helpers for elastic training."""

from elastic_trainer.data.sampler import ElasticBatchSampler, rank_slice

__all__ = ["ElasticBatchSampler", "rank_slice"]
