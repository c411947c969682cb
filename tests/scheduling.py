"""Which test file runs when under `pytest -n 2 --dist loadfile` (.ci/run), and what each waits for.

On a fresh machine the control-plane tier's Go tools take some 44 CPU-minutes to build (docs/ci.md), and
.ci/run builds them in the background while the suite runs (issue 31, item 5). xdist's own loadfile
scheduler hands out files largest first whatever they need, so a worker took a tier file minutes before
its tools were built and sat waiting, and the tier's slow, mostly waiting files ran in a clump at the end
with a core idle. This scheduler hands a worker, each time it needs work:

1. a file whose tools are all built: the tier's first (they wait on control planes and real nodes, which
   leaves the cores to the build and the rest of the suite), the real-node files first of those (they run
   one after another, the longest chain); but once the build is done, a tier file only beside a file of
   the rest, never beside another tier file while the rest has files left (two waiting files at once
   left a core idle: 40-57% idle for 12 minutes of a fresh run, docs/ci.md);
2. else any file that needs no tool;
3. else the file whose tools will be built first (.ci/run builds them in build.TOOLS' order): the worker
   waits for them in tests/conftest.py's pytest_runtest_protocol, before pytest-timeout's clock starts.

"The build is done" is every tool built: with a tool that fails to build, or a plain `pytest -n 2 --dist
loadfile` that builds only as tests ask, it never is, and tier files may run side by side throughout.

The files in ONE_AT_A_TIME share this machine's containerd state, network namespaces and image caches: a
worker is given one only while no other worker has one unfinished (parallel only where it is safe).
"""

from __future__ import annotations

import subprocess

from tests.controlplane import build

TIER = "tests/controlplane/"

# The tier's tools by what starts them (tests/controlplane/cluster.py, node.py, platform_images.py,
# operators.py, pulumi_engine.py).
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
REAL_NODE = ("etcdctl", "kubelet", "kube-proxy", "coredns", "kube-router")
OPERATORS = ("elasticjob-controller", "training-operator")
ENGINE = ("pulumi", "pulumi-resource-kubernetes")  # the `pulumi_engine` mark's

# Files whose tests share this machine's containerd state, network namespaces or image caches (the
# training image, the node's images): one worker at a time runs them. RealNode.stop() removes the CNI
# network namespaces that appeared while its node ran, and two builds of one cached image would write
# the same files.
ONE_AT_A_TIME = (
    "tests/containers/",
    "tests/controlplane/test_real_node.py",
    "tests/controlplane/test_real_network_policy.py",
    "tests/controlplane/test_real_node_loss.py",
    "tests/controlplane/test_real_training.py",
)

# Beyond the control plane that every tier file starts. tests/conftest.py checks at collection that each
# test marked `pulumi_engine`, or asking for the tier's etcd (`each_etcd`), is in a file listed here for it.
_EXTRA = {
    "tests/controlplane/test_real_": REAL_NODE,
    "tests/controlplane/test_operators.py": OPERATORS,
    "tests/controlplane/test_etcd_gate_resolver.py": OPERATORS,
    "tests/controlplane/test_pulumi_": ENGINE,
    "tests/controlplane/test_stack_outputs.py": ENGINE,
}
_OUTSIDE_THE_TIER = {
    "tests/k8s/test_etcd_bootstrap.py": ("etcd", "etcdctl"),
    # The tier's etcd 3.5 beside Debian's 3.4 (tests/training_image/conftest.py, each_etcd).
    "tests/training_image/test_etcd_gate.py": ("etcd",),
    "tests/training_image/test_etcd_gate_sweep.py": ("etcd",),
    "tests/training_image/test_rdzv_store_ttl.py": ("etcd",),
}


def tools_for(path: str) -> tuple[str, ...]:
    """The tier's tools the tests of the file PATH (relative to the repository) need; () for most."""
    if not path.startswith(TIER):
        return _OUTSIDE_THE_TIER.get(path, ())
    extra = next((tools for prefix, tools in _EXTRA.items() if path.startswith(prefix)), ())
    return CONTROL_PLANE + extra


def one_at_a_time(path: str) -> bool:
    return path.startswith(ONE_AT_A_TIME)


_ORDER = {tool.name: index for index, tool in enumerate(build.TOOLS)}


def _ready_at(tools: tuple[str, ...]) -> int:
    """Where in the background build's order the last of TOOLS comes (-1 for none)."""
    return max((_ORDER[name] for name in tools), default=-1)


def make_scheduler(config, log):
    """The scheduler for pytest_xdist_make_scheduler: xdist's loadscope one with a file per scope and
    the choice of the next file above (the hook: https://pytest-xdist.readthedocs.io/en/stable/how-to.html)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByToolsBuilt(LoadScopeScheduling):
        def __init__(self, config, log) -> None:
            super().__init__(config, log)
            self._built: set[str] = set()  # once built, a tool stays built for the run

        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0]

        def _is_built(self, tools: tuple[str, ...]) -> bool:
            for name in tools:
                if name not in self._built:
                    try:
                        current = build.built(name)
                    except (OSError, subprocess.CalledProcessError):  # no `go` to ask: the test's own ensure says so
                        current = False
                    if not current:
                        return False
                    self._built.add(name)
            return True

        def _exclusive_elsewhere(self, node) -> bool:
            return self._unfinished_elsewhere(node, one_at_a_time)

        def _unfinished_elsewhere(self, node, which) -> bool:
            """Whether a worker other than NODE has an unfinished file that WHICH(path) is true of."""
            return any(
                not all(tests.values())
                for other, scopes in self.assigned_work.items()
                if other is not node
                for scope, tests in scopes.items()
                if which(scope)
            )

        def _choose(self, node) -> str | None:
            allowed = [s for s in self.workqueue if not (one_at_a_time(s) and self._exclusive_elsewhere(node))]
            ready = [s for s in allowed if self._is_built(tools_for(s))]
            tier = [s for s in ready if s.startswith(TIER)]
            tier = [s for s in tier if one_at_a_time(s)] + [s for s in tier if not one_at_a_time(s)]
            rest = [s for s in ready if not s.startswith(TIER)]
            # Once the build is done, two tier files at once would leave the cores idle while both wait:
            # a tier file beside one of the rest keeps them busy.
            building = not self._is_built(tuple(build.BY_NAME))
            both_waiting = not building and self._unfinished_elsewhere(node, lambda s: s.startswith(TIER))
            first = rest + tier if both_waiting else tier + rest
            if first:
                return first[0]
            # Nothing that can start now: the file whose tools come first (a stable min: queue order on ties).
            return min(allowed, key=lambda s: _ready_at(tools_for(s)), default=None)

        def _assign_work_unit(self, node) -> None:
            scope = self._choose(node)
            if scope is None:
                # Only ONE_AT_A_TIME files are left and another worker runs one: they run there, one after
                # another. This worker is done once its own tests are (a worker holds its last test until it
                # is sent more or told to stop: xdist remote.py), and a crash elsewhere still gets a new one.
                node.shutdown()
                return
            # Move the chosen file to the queue's front; the base class assigns the front.
            self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            # A worker refused a ONE_AT_A_TIME file may take another file once this one finishes its own;
            # a worker that replaces a crashed one has no collection yet (xdist's workerready comes first).
            for other in self.nodes:
                if other is not node and other in self.registered_collections:
                    self._reschedule(other)

    return ByToolsBuilt(config, log)
