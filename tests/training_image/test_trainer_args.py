"""The trainer's command line refuses values that would crash or silently misbehave mid-run."""

import argparse
from pathlib import Path

import pytest
from elastic_trainer.train_config import TrainConfig

REQUIRED = ["--checkpoint-dir", "/tmp/ckpt", "--total-steps", "10", "--global-batch-size", "8"]


def _parse(*extra: str, required: list[str] = REQUIRED) -> TrainConfig:
    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    return TrainConfig.from_args(parser.parse_args([*required, *extra]))


@pytest.fixture(autouse=True)
def _no_job_env(monkeypatch):
    monkeypatch.delenv("TORCHFLEET_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("TORCHFLEET_DATALOADER_WORKERS", raising=False)


def test_defaults():
    cfg = _parse()
    assert (cfg.total_steps, cfg.global_batch_size, cfg.checkpoint_every, cfg.progress_every) == (10, 8, 50, 1)
    assert cfg.num_workers == 0


# The names torchfleet/jobs/pod_template.py (environment) sets on a CLI-submitted job's pods.
def test_defaults_come_from_the_job_environment(monkeypatch):
    # Regression (review): --checkpoint-dir was required and --num-workers 0 inside a job that
    # already says both in its environment.
    monkeypatch.setenv("TORCHFLEET_CHECKPOINT_DIR", "/mnt/shared/output/job/checkpoints")
    monkeypatch.setenv("TORCHFLEET_DATALOADER_WORKERS", "6")
    cfg = _parse(required=["--total-steps", "10", "--global-batch-size", "8"])
    assert (cfg.checkpoint_dir, cfg.num_workers) == (Path("/mnt/shared/output/job/checkpoints"), 6)
    cfg = _parse("--checkpoint-dir", "/elsewhere", "--num-workers", "1")  # flags still win
    assert (cfg.checkpoint_dir, cfg.num_workers) == (Path("/elsewhere"), 1)


def test_without_the_job_environment_the_checkpoint_dir_is_required(capsys):
    with pytest.raises(SystemExit):
        _parse(required=["--total-steps", "10", "--global-batch-size", "8"])
    assert "--checkpoint-dir" in capsys.readouterr().err


def test_a_bad_worker_count_in_the_environment_names_the_flag(monkeypatch, capsys):
    monkeypatch.setenv("TORCHFLEET_DATALOADER_WORKERS", "-2")
    with pytest.raises(SystemExit):
        _parse()
    assert "argument --num-workers: must be >= 0" in capsys.readouterr().err


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
        ("--max-nonfinite-steps", "-1"),
        ("--clip-grad-norm", "0"),
        ("--clip-grad-norm", "nan"),
        ("--clip-grad-norm", "abc"),  # was argparse's "invalid _positive_float value: 'abc'"
        ("--checkpoint-write-timeout-s", "0"),
        ("--checkpoint-write-timeout-s", "abc"),
    ],
)
def test_out_of_range_values_are_usage_errors_naming_the_flag(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parse(flag, value)
    assert exit_info.value.code == 2
    assert f"argument {flag}: must be " in capsys.readouterr().err


# The checkpoint flags the GPU tests and the benchmark use (issue 11): async on and the single format by default.
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((), (True, "single")),
        (("--no-async-checkpoint",), (False, "single")),
        (("--async-checkpoint", "--checkpoint-format", "sharded"), (True, "sharded")),
    ],
)
def test_checkpoint_flags(flags, expected):
    cfg = _parse(*flags)
    assert (cfg.async_checkpoint, cfg.checkpoint_format) == expected


def test_an_unknown_checkpoint_format_is_a_usage_error_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parse("--checkpoint-format", "zip")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --checkpoint-format: invalid choice: 'zip'" in err and "single" in err and "sharded" in err
