"""The trainer's command line refuses values that would crash or silently misbehave mid-run."""

import argparse

import pytest
from elastic_trainer.trainer import TrainConfig

REQUIRED = ["--checkpoint-dir", "/tmp/ckpt", "--total-steps", "10", "--global-batch-size", "8"]


def _parse(*extra: str) -> TrainConfig:
    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    return TrainConfig.from_args(parser.parse_args([*REQUIRED, *extra]))


def test_defaults():
    cfg = _parse()
    assert (cfg.total_steps, cfg.global_batch_size, cfg.checkpoint_every, cfg.progress_every) == (10, 8, 50, 1)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        # Regression (review): --progress-every 0 was a ZeroDivisionError at the first step.
        ("--progress-every", "0"),
        ("--checkpoint-every", "0"),
        ("--keep-checkpoints", "0"),
        ("--total-steps", "0"),
        ("--global-batch-size", "-1"),
        ("--num-workers", "-1"),
    ],
)
def test_out_of_range_values_are_usage_errors_naming_the_flag(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parse(flag, value)
    assert exit_info.value.code == 2
    assert f"argument {flag}: must be >= " in capsys.readouterr().err
