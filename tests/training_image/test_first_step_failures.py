"""A worker that fails before its first step, the same way each time, ends its node with exit 1 after
3 attempts and its own traceback (issue 32, a second fresh walk: a Task error in the first step, a typo
in a method the static Task check cannot see, was restarted 101 times by torchrun's --max_restarts=100).
Failures after a step (a peer lost, a spot reclaim) keep restarting (elastic_trainer/launch/first_step.py).
"""

from __future__ import annotations

import shutil
import textwrap
from types import SimpleNamespace

import pytest
from elastic_trainer.launch import first_step
from elastic_trainer.local import SYNTHETIC_EXAMPLE


def _failure(tmp_path, attempt: int, message: str = "AttributeError: 'Task' object has no attribute 'loss_summ'",
             exitcode: int = 1, trained: bool = False):
    folder = tmp_path / f"attempt_{attempt}" / "0"
    folder.mkdir(parents=True)
    if trained:
        (folder / first_step.PROGRESS_NAME).touch()
    # torch's ProcessFailure.message for a worker that raised: the error file's entry, timestamp included
    entry = {"message": message, "extraInfo": {"py_callstack": f"Traceback ...\n{message}\n", "timestamp": attempt}}
    return {0: SimpleNamespace(exitcode=exitcode, message=entry, error_file=str(folder / "error.json"))}


def test_the_third_failure_before_a_step_with_the_same_error_stops(tmp_path):
    counter = first_step.FirstStepFailures()
    assert counter.failed(_failure(tmp_path, 0)) is None
    assert counter.failed(_failure(tmp_path, 1)) is None
    stop = counter.failed(_failure(tmp_path, 2))
    assert stop and "failed 3 times in a row before its first step" in stop and "exit 1" in stop
    assert "Traceback ...\nAttributeError: 'Task' object has no attribute 'loss_summ'" in stop


def test_a_step_a_peer_leaving_or_another_error_starts_the_count_again(tmp_path):
    counter = first_step.FirstStepFailures()
    counter.failed(_failure(tmp_path, 0))
    counter.failed(_failure(tmp_path, 1))
    assert counter.failed(_failure(tmp_path, 2, trained=True)) is None  # that attempt trained: a later failure
    assert counter.failed(_failure(tmp_path, 3)) is None and counter.count == 1
    counter.failed(_failure(tmp_path, 4))
    assert counter.failed(_failure(tmp_path, 5, "RuntimeError: peer 1 gone", exitcode=75)) is None  # a peer left
    counter.failed(_failure(tmp_path, 6))
    counter.failed(_failure(tmp_path, 7))
    assert counter.failed(_failure(tmp_path, 8, "RuntimeError: other")) is None and counter.count == 1  # not the same


def test_the_trainer_marks_its_attempt_once(tmp_path, monkeypatch):
    error_file = tmp_path / "attempt_0" / "0" / "error.json"
    error_file.parent.mkdir(parents=True)
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    monkeypatch.setattr(first_step, "_marked", False)
    first_step.mark_progress()
    assert (error_file.parent / first_step.PROGRESS_NAME).is_file()


@pytest.mark.slow
def test_a_task_error_in_the_first_step_ends_the_node_after_3_attempts(make_job, tmp_path):
    # Real launcher, torchrun and etcd. Asserts what holds at any load: the exit, the attempts counted in the
    # log (never the time they took), and the worker's own error in it.
    shutil.copy(SYNTHETIC_EXAMPLE, tmp_path / "synthetic.py")  # a module beside the script, as a user's own
    script = tmp_path / "bad_method.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import synthetic

        class Misspelled(synthetic.SyntheticRegression):
            def loss_sum(self, model, batch, device):
                return self.loss_summ(model, batch, device)  # the typo: a method the class lacks

        synthetic.SyntheticRegression = Misspelled
        sys.exit(synthetic.main())
    """))
    job = make_job("--total-steps=5", "--global-batch-size=4", nnodes="1:1", script=script)
    node = job.start_node()
    code = node.wait(300)  # a bound for a loaded machine; an attempt takes seconds
    text = node.log_text()
    assert code == 1, text[-4000:]
    assert "failed 3 times in a row before its first step" in text, text[-4000:]
    assert "has no attribute 'loss_summ'" in text and "bad_method.py" in text, text[-4000:]
    assert text.count('"ev": "start"') == 3, text[-4000:]  # 3 attempts, not 101
