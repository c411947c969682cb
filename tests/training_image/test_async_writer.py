"""One background write at a time; its result or failure comes back at the next wait or poll."""

from __future__ import annotations

import threading

import pytest
from elastic_trainer.store.async_writer import AsyncWriter
from elastic_trainer.store.fence import StaleGenerationError


def test_the_write_runs_in_the_background_and_its_result_comes_back_at_wait():
    release = threading.Event()
    writer = AsyncWriter()
    writer.submit(lambda: release.wait(5) and "committed", step=10)
    assert writer.busy and writer.poll() is None  # still writing: training goes on
    release.set()
    outcome = writer.wait()
    assert outcome.ok and outcome.result == "committed" and outcome.context == {"step": 10}
    assert outcome.seconds >= 0 and not writer.busy
    assert writer.wait() is None  # collected once


def test_at_most_one_write_in_flight():
    release = threading.Event()
    writer = AsyncWriter()
    writer.submit(lambda: release.wait(5))
    with pytest.raises(RuntimeError, match="already in flight"):
        writer.submit(lambda: None)
    release.set()
    writer.wait()
    writer.submit(lambda: "next")  # allowed once the previous one was waited for
    assert writer.wait().result == "next"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), StaleGenerationError("gen 1 is fenced")])
def test_a_failure_is_reported_at_the_next_wait_not_raised_in_the_thread(error):
    writer = AsyncWriter()

    def fail():
        raise error

    writer.submit(fail, step=20, reason="periodic")
    outcome = writer.wait()
    assert not outcome.ok and outcome.error is error and outcome.context["step"] == 20


def test_poll_collects_a_finished_write_without_blocking():
    writer = AsyncWriter()
    writer.submit(lambda: 5)
    writer._thread.join(5)
    outcome = writer.poll()
    assert outcome is not None and outcome.result == 5
    assert writer.poll() is None and not writer.busy


def test_wait_with_a_timeout_leaves_a_slow_write_in_flight():
    release = threading.Event()
    writer = AsyncWriter()
    writer.submit(lambda: release.wait(5) and "late")
    with pytest.raises(TimeoutError):
        writer.wait(timeout=0.05)
    assert writer.busy
    release.set()
    assert writer.wait().result == "late"


def test_the_writer_thread_does_not_keep_a_dying_worker_alive():
    # a write blocked on a dead peer must not hold up the worker's exit (see the module docstring)
    blocked = threading.Event()
    writer = AsyncWriter()
    writer.submit(blocked.wait)
    assert writer._thread.daemon
    blocked.set()
    writer.wait()


def test_wait_within_bounds_the_write_from_its_submit_not_from_each_wait():
    # issue 23: the bound is on the write; two waits of 0.2 s each must not add up to 0.4 s of write
    release = threading.Event()
    writer = AsyncWriter()
    writer.submit(lambda: release.wait(30), step=40, reason="periodic")
    release_after = threading.Timer(30, release.set)
    release_after.start()
    try:
        writer._thread.join(0.3)  # the write has now run at least 0.3 s
        with pytest.raises(TimeoutError, match="still running"):
            writer.wait_within(0.2)  # already past its bound: no further wait
        assert writer.busy and writer.context == {"step": 40, "reason": "periodic"}
        assert writer.running_s() >= 0.3
    finally:
        release.set()
        release_after.cancel()
    assert writer.wait_within(30).ok and writer.context == {} and writer.running_s() == 0.0
