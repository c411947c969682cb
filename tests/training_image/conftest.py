"""Real-run fixtures: one etcd for the whole session, a fresh rendezvous id per job; and ``group``,
one in-process gloo rank for the trainer's own tests (tests/harness/trainer_run.py).

etcd is Debian's ``etcd-server`` (3.4, with ``--enable-v2=true``), which ``.ci/run`` installs; elsewhere
``TORCHFLEET_ETCD_BINARY`` names the binary to run. ``each_etcd`` is that one and the tier's etcd
3.5 (tests/controlplane/build.py, the platform's etcd image's minor, k8s/base/etcd/statefulset.yaml),
for what the two versions' v2 stores do differently (a directory's TTL: launch/rdzv_store_ttl.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from elastic_trainer.local import ENV_ETCD_BINARY, Etcd, LocalJob, etcd_binary
from elastic_trainer.store import checkpoint_verify as checkpoint_module  # _hash_file: every read-back hash

from tests.controlplane import build
from tests.harness.trainer_run import group  # noqa: F401 (a fixture)


@pytest.fixture(scope="session")
def etcd() -> Iterator[Etcd]:
    if etcd_binary() is None:
        pytest.fail(f"etcd is not installed (apt-get install etcd-server), or ${ENV_ETCD_BINARY} is not executable")
    with Etcd() as server:
        yield server


@pytest.fixture(scope="session", params=["etcd-path", "etcd-tier"])
def each_etcd(request) -> Iterator[Etcd]:
    """etcd_binary()'s etcd (Debian's 3.4 in CI), then the tier's 3.5: a module runs on both by
    defining ``etcd`` as this fixture. The tier's is built now when .ci/run's background build has not
    (or waited for while it builds it: tests/controlplane/build.py ensure); one that cannot be built
    fails the test, never skips it."""
    if request.param == "etcd-path":
        binary = etcd_binary()
        if binary is None:
            pytest.fail(f"etcd is not installed (apt-get install etcd-server), or ${ENV_ETCD_BINARY} is not executable")
    else:
        try:
            binary = str(build.ensure("etcd")[0])
        except build.BuildError as error:
            pytest.fail(f"the tier's etcd could not be built: {error}")
    with Etcd(binary) as server:
        yield server


@pytest.fixture
def hashed(monkeypatch) -> list[str]:
    """Names of the checkpoints whose files were read back to be hashed, in order."""
    calls: list[str] = []
    real = checkpoint_module._hash_file

    def counting(path, *args):
        calls.append(path.parent.name)
        return real(path, *args)

    monkeypatch.setattr(checkpoint_module, "_hash_file", counting)
    return calls


@pytest.fixture
def make_job(etcd: Etcd, tmp_path, request) -> Iterator[Callable[..., LocalJob]]:
    jobs: list[LocalJob] = []

    def factory(*script_args: str, nnodes: str = "1:2", workdir=None, **kwargs) -> LocalJob:
        job = LocalJob(
            etcd_endpoint=etcd.endpoint,
            run_id=f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}",
            workdir=workdir or tmp_path / f"job{len(jobs)}",
            script_args=list(script_args),
            nnodes=nnodes,
            **kwargs,
        )
        jobs.append(job)
        return job

    yield factory
    failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
    for job in jobs:
        if failed:
            job.dump_stacks()  # where each process was, into the logs printed below
        job.stop()
    if failed:
        for job in jobs:
            for node in job.nodes:
                print(f"----- {node.name} ({job.run_id}) -----\n{node.log_text()[-12000:]}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
