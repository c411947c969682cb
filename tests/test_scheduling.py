"""tests/scheduling.py: which file a worker is handed, with xdist's own scheduler class under it and workers
that only record what they were sent (the real run is .ci/run's; these pin the choice's rules)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import scheduling
from tests.controlplane import build

TIER_FILE = "tests/controlplane/test_jobs.py"
ENGINE_FILE = "tests/controlplane/test_pulumi_local.py"
REAL_NODE_FILE = "tests/controlplane/test_real_node.py"
REAL_TRAINING_FILE = "tests/controlplane/test_real_training.py"
IMAGE_FILE = "tests/containers/test_image_runs.py"
PLAIN_FILE = "tests/torchfleet/test_cost.py"
OTHER_PLAIN_FILE = "tests/torchfleet/test_limits.py"


class Worker:
    """What xdist's scheduler calls on a worker: it is sent test indices, or told to shut down."""

    def __init__(self, name: str) -> None:
        self.name, self.sent, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def __repr__(self) -> str:
        return self.name


def scheduler(files: dict[str, int], built: set[str], monkeypatch, workers: int = 2):
    """A scheduler over FILES (path -> number of tests), with the tools BUILT, and its workers collected."""
    monkeypatch.setattr(build, "built", lambda name: name in built)
    config = SimpleNamespace(getvalue=lambda key: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=True))
    sched = scheduling.make_scheduler(config, None)
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    collection = [f"{path}::test_{i}" for path, count in files.items() for i in range(count)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    return sched, nodes, collection


def files_sent(node: Worker, collection: list[str]) -> list[str]:
    """The files NODE was sent, in order."""
    out = []
    for indices in node.sent:
        for path in dict.fromkeys(collection[i].split("::")[0] for i in indices):
            out.append(path)
    return out


def finish(sched, node: Worker, collection: list[str], path: str) -> None:
    for index, nodeid in enumerate(collection):
        if nodeid.startswith(path + "::"):
            sched.mark_test_complete(node, index)


def test_tools_for_names_only_tools_that_build_knows():
    for path in (TIER_FILE, ENGINE_FILE, REAL_NODE_FILE, IMAGE_FILE, "tests/k8s/test_etcd_bootstrap.py"):
        assert set(scheduling.tools_for(path)) <= set(build.BY_NAME), path
    assert scheduling.tools_for(PLAIN_FILE) == ()
    assert set(scheduling.ENGINE) <= set(scheduling.tools_for(ENGINE_FILE))
    assert set(scheduling.REAL_NODE) <= set(scheduling.tools_for(REAL_TRAINING_FILE))
    assert not set(scheduling.ENGINE) & set(scheduling.tools_for(TIER_FILE))


def test_a_tier_file_waits_for_its_tools_while_other_files_run(monkeypatch):
    """Nothing built: the workers take the files that need nothing, though the tier's has more tests."""
    sched, (a, b), collection = scheduler({TIER_FILE: 50, PLAIN_FILE: 5, OTHER_PLAIN_FILE: 5}, set(), monkeypatch)
    sched.schedule()
    assert files_sent(a, collection) + files_sent(b, collection) == [PLAIN_FILE, OTHER_PLAIN_FILE]
    # Then, with nothing else to run, the tier's file is handed out: its worker waits for the build.
    finish(sched, a, collection, PLAIN_FILE)
    assert files_sent(a, collection)[-1] == TIER_FILE


def test_a_tier_file_whose_tools_are_built_goes_first(monkeypatch):
    """The tier's files wait on control planes and nodes, which leaves the cores to the rest: first."""
    sched, (a, _), collection = scheduler({PLAIN_FILE: 50, TIER_FILE: 5, OTHER_PLAIN_FILE: 5},
                                          set(scheduling.CONTROL_PLANE), monkeypatch)
    sched.schedule()
    assert files_sent(a, collection)[0] == TIER_FILE


def test_real_node_files_run_one_at_a_time_and_first_of_the_tier(monkeypatch):
    everything = set(build.BY_NAME)
    files = {TIER_FILE: 30, REAL_NODE_FILE: 3, REAL_TRAINING_FILE: 3, PLAIN_FILE: 20}
    sched, (a, b), collection = scheduler(files, everything, monkeypatch)
    sched.schedule()
    assert files_sent(a, collection) == [REAL_NODE_FILE]
    assert REAL_TRAINING_FILE not in files_sent(b, collection)  # a's real node is still running
    assert files_sent(b, collection) == [PLAIN_FILE]  # the build is done: beside a tier file, one of the rest
    finish(sched, a, collection, REAL_NODE_FILE)
    assert files_sent(a, collection)[-1] == REAL_TRAINING_FILE


def test_the_one_at_a_time_files_stay_on_one_worker_and_the_other_stops(monkeypatch):
    """The other worker is told to stop: a worker holds its last test until it is sent more or told to stop
    (xdist's remote.py), and the one-at-a-time files left would never be its to run."""
    files = {IMAGE_FILE: 3, REAL_NODE_FILE: 3}
    sched, (a, b), collection = scheduler(files, set(build.BY_NAME), monkeypatch)
    sched.schedule()
    assert files_sent(a, collection) == [REAL_NODE_FILE] and files_sent(b, collection) == []
    assert b.shutting_down and not a.shutting_down
    # a takes the next one itself once its own is nearly done (xdist hands more work at 2 tests left)
    sched.mark_test_complete(a, collection.index(f"{REAL_NODE_FILE}::test_0"))
    assert files_sent(a, collection) == [REAL_NODE_FILE, IMAGE_FILE]
    finish(sched, a, collection, REAL_NODE_FILE)
    finish(sched, a, collection, IMAGE_FILE)
    assert sched.tests_finished


def test_a_worker_that_replaces_a_crashed_one_is_not_handed_work_before_it_has_collected(monkeypatch):
    """xdist adds the new worker at workerready and its collection later: a file handed to it before then
    would be looked up in a collection it does not have yet (a KeyError, the whole run's INTERNALERROR)."""
    sched, (a, b), collection = scheduler({PLAIN_FILE: 10, OTHER_PLAIN_FILE: 10, TIER_FILE: 10},
                                          set(build.BY_NAME), monkeypatch)
    sched.schedule()
    sched.remove_node(b)  # crashed: its file goes back on the queue
    replacement = Worker("gw2")
    sched.add_node(replacement)
    sched.mark_test_complete(a, collection.index(files_sent(a, collection)[0] + "::test_0"))
    assert replacement.sent == []
    sched.add_node_collection(replacement, collection)
    sched.schedule()  # what xdist calls once the new worker has collected
    assert replacement.sent


def test_a_tool_that_cannot_be_asked_about_counts_as_not_built(monkeypatch):
    """Without `go` the build cannot say whether a binary is current: the tier's files wait, the run goes on
    (their tests fail with the build's error), the controller does not stop."""
    sched, (a, _), collection = scheduler({TIER_FILE: 10, PLAIN_FILE: 5}, set(), monkeypatch)

    def no_go(name):
        raise FileNotFoundError("go")

    monkeypatch.setattr(build, "built", no_go)
    sched.schedule()
    assert files_sent(a, collection) == [PLAIN_FILE]


def test_with_only_waiting_files_left_the_one_built_first_is_handed_out(monkeypatch):
    """The engine is the background build's last: a file that needs only the control plane comes first."""
    sched, (a, b), collection = scheduler({ENGINE_FILE: 40, TIER_FILE: 5}, set(), monkeypatch)
    sched.schedule()
    assert files_sent(a, collection) == [TIER_FILE] and files_sent(b, collection) == [ENGINE_FILE]


@pytest.mark.parametrize("path", [ENGINE_FILE, "tests/controlplane/test_stack_outputs.py"])
def test_the_engine_files_wait_for_the_engine(path):
    assert set(scheduling.ENGINE) <= set(scheduling.tools_for(path))


def test_once_the_build_is_done_a_tier_file_runs_beside_the_rest_not_beside_another(monkeypatch):
    """Two tier files at once both wait (on control planes, nodes) and leave the cores idle."""
    other_tier = "tests/controlplane/test_reader_pod.py"
    files = {TIER_FILE: 30, other_tier: 20, PLAIN_FILE: 10}
    sched, (a, b), collection = scheduler(files, set(build.BY_NAME), monkeypatch)
    sched.schedule()
    assert files_sent(a, collection) == [TIER_FILE] and files_sent(b, collection) == [PLAIN_FILE]
    # While the build runs, the cores are the build's: both workers take tier files.
    sched, (a, b), collection = scheduler(files, set(scheduling.CONTROL_PLANE), monkeypatch)
    sched.schedule()
    assert files_sent(a, collection) == [TIER_FILE] and files_sent(b, collection) == [other_tier]
