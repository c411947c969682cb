"""The final model in TORCHFLEET_OUTPUT_DIR, the evaluate() hook and custom scalars (issue 21, results out).

In-process runs of the real trainer (one gloo rank, tests/harness/trainer_run.py); the export is read
back the way the README says a user loads it: torch alone, ``weights_only=True``, in a process that
cannot import elastic_trainer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from elastic_trainer import events as events_module
from elastic_trainer import outputs
from elastic_trainer.signals import StopRequest
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.trainer import _Run
from torch import nn

from tests.harness.trainer_run import Task, config, printed


class Recorder:
    """Stands for torch's SummaryWriter (the tensorboard package is not in the dev venv)."""

    added: list[tuple[str, float, int]] = []  # noqa: RUF012 (reset per test by the fixture)

    def __init__(self, log_dir) -> None:
        pass

    def add_scalar(self, tag, value, step) -> None:
        Recorder.added.append((tag, value, step))

    def close(self) -> None:
        pass


@pytest.fixture
def recorded(monkeypatch) -> list[tuple[str, float, int]]:
    Recorder.added = []
    monkeypatch.setattr(events_module, "_summary_writer", Recorder)
    return Recorder.added


class EvalTask(Task):
    def __init__(self) -> None:
        super().__init__()
        self.evaluated: list[tuple[int, bool]] = []  # (step, the model was in training mode)

    def evaluate(self, model, device, step):
        self.evaluated.append((step, model.training))
        assert not torch.is_grad_enabled()
        return {"mse": 0.5 / step, "custom/acc": torch.tensor(step / 10), "skipped": float("nan")}

    def scalars(self, model, optimizer, step):
        return {"train/lr": optimizer.param_groups[0]["lr"]}


def _load_without_torchfleet(path) -> dict:
    """model.pt read by a bare Python (-I: no PYTHONPATH, no user site) that only has torch."""
    code = ("import sys, torch; state = torch.load(sys.argv[1], weights_only=True); "
            "print({k: v.tolist() for k, v in state.items()})")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                         cwd="/", check=True)
    return eval(out.stdout)  # noqa: S307 (our own child's repr of lists of floats)


def test_the_final_model_is_exported_in_a_plain_format_that_loads_without_torchfleet(group, tmp_path, capsys,
                                                                                        recorded):
    task = EvalTask()
    out = tmp_path / "output"
    assert _Run(task, config(tmp_path, output_dir=out, eval_every=4, tensorboard_dir=tmp_path / "tb"),
                StopRequest()).run() == 0
    events = printed(capsys)
    assert [e["step"] for e in events if e["ev"] == "model"] == [6]
    card = json.loads((out / "model" / "model.json").read_text())
    assert (card["format"], card["step"], card["world_size"], card["file"]) == (outputs.FORMAT, 6, 1, "model.pt")
    assert card["parameters"] == 4 * 8 + 8 + 8 + 1
    assert card["tensors"]["0.weight"] == {"shape": [8, 4], "dtype": "float32"}
    assert card["bytes"] == (out / "model" / "model.pt").stat().st_size
    assert card["sha256"] == outputs._sha256(out / "model" / "model.pt")
    loaded = _load_without_torchfleet(out / "model" / "model.pt")
    final = CheckpointStore(tmp_path / "ckpt").load_latest("cpu")[0]["model"]
    assert loaded == {k: v.tolist() for k, v in final.items()}  # the final checkpoint's weights, exactly
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 1))
    model.load_state_dict(torch.load(out / "model" / "model.pt", weights_only=True))  # as the card says
    assert list(out.iterdir()) == [out / "model"]  # no staging folder left behind


def test_evaluate_runs_every_eval_every_steps_and_after_the_last_in_eval_mode(group, tmp_path, capsys, recorded):
    task = EvalTask()
    assert _Run(task, config(tmp_path, total_steps=7, eval_every=3, tensorboard_dir=tmp_path / "tb"),
                StopRequest()).run() == 0
    assert task.evaluated == [(3, False), (6, False), (7, False)]
    assert [(e["step"], e["values"]) for e in printed(capsys, "eval")] == [
        (s, {"mse": round(0.5 / s, 6), "custom/acc": round(s / 10, 6)}) for s in (3, 6, 7)]
    evals = [(tag, step) for tag, _, step in recorded if "mse" in tag or "acc" in tag]
    assert evals == [(tag, s) for s in (3, 6, 7) for tag in ("eval/mse", "custom/acc")]  # a NaN is left out
    lrs = [(step, value) for tag, value, step in recorded if tag == "train/lr"]
    assert [step for step, _ in lrs] == list(range(1, 8))
    # asked after the step's scheduler.step(): step 3's value is the rate the next steps use (StepLR(3))
    assert lrs[1][1] == pytest.approx(0.01) and lrs[2][1] == pytest.approx(0.001)


def test_a_stop_neither_evaluates_nor_exports(group, tmp_path, capsys):
    """A spot notice leaves time for the stop checkpoint only: no evaluation, no final model."""
    stop = StopRequest()
    task = EvalTask()
    task.stop, task.stop_at_call = stop, 3
    assert _Run(task, config(tmp_path, output_dir=tmp_path / "output", eval_every=1), stop).run() == 143
    assert task.evaluated == [(1, False), (2, False)]
    assert not (tmp_path / "output").exists()


def test_a_restart_after_the_final_checkpoint_exports_once(group, tmp_path, capsys):
    """Resumed from the final checkpoint (the export was lost with the pod): exported then; not again after."""
    out = tmp_path / "output"
    assert _Run(Task(), config(tmp_path), StopRequest()).run() == 0
    assert not out.exists()
    assert _Run(Task(), config(tmp_path, output_dir=out), StopRequest()).run() == 0
    assert outputs.exported_step(out) == 6
    written = (out / "model" / "model.json").stat().st_mtime_ns
    assert _Run(Task(), config(tmp_path, output_dir=out), StopRequest()).run() == 0
    assert (out / "model" / "model.json").stat().st_mtime_ns == written


def test_a_store_that_refuses_the_export_does_not_fail_the_job(group, tmp_path, capsys):
    (tmp_path / "output").write_text("a file where the folder should be")
    assert _Run(Task(), config(tmp_path, output_dir=tmp_path / "output"), StopRequest()).run() == 0
    failed = printed(capsys, "model_failed")
    assert len(failed) == 1 and "FileExistsError" in failed[0]["error"]


def test_evaluate_must_return_a_mapping(group, tmp_path, capsys):
    class Bad(Task):
        def evaluate(self, model, device, step):
            return [1.0]

    with pytest.raises(TypeError, match="evaluate must return a mapping"):
        _Run(Bad(), config(tmp_path), StopRequest()).run()
