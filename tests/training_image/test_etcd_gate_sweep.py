"""etcd-gate's sweep (elastic_trainer/etcd_gate/sweep.py) on the real etcd 3.4 and 3.5 (``each_etcd``).

A run's store directory has no TTL (etcd 3.5 cannot renew one: launch/rdzv_store_ttl.py), so the
gate deletes the store's empty directories, and a run's own once its rendezvous state is gone;
nothing a run wrote may be lost to it.
"""

from __future__ import annotations

import threading
import uuid

import etcd as python_etcd  # the `etcd` fixture is the server
import pytest
from elastic_trainer.etcd_gate import Limits, Upstream, serve
from elastic_trainer.etcd_gate.resolvers import Static
from elastic_trainer.etcd_gate.sweep import Sweeper, sweep_once
from elastic_trainer.launch import rdzv_store_ttl

from tests.training_image.test_etcd_gate import params, rendezvous

RDZV, STORE = "/torch/elastic/rendezvous", "/torch/elastic/store"


@pytest.fixture
def etcd(each_etcd):
    return each_etcd


def client_of(endpoint: str) -> python_etcd.Client:
    host, port = endpoint.split(":")
    return python_etcd.Client(host=host, port=int(port))


def exists(client: python_etcd.Client, key: str) -> bool:
    try:
        client.read(key)
        return True
    except python_etcd.EtcdKeyNotFound:
        return False


def test_empty_directories_go_a_live_runs_own_and_every_key_stay(etcd):
    client, tag = client_of(etcd.endpoint), uuid.uuid4().hex[:8]
    done, live, busy = f"done-{tag}", f"live-{tag}", f"busy-{tag}"
    for run in (done, live, busy):
        client.write(f"{STORE}/{run}", None, dir=True, prevExist=False)
        client.write(f"{STORE}/{run}/ab/cd", None, dir=True, prevExist=False)  # as a base64 "/" leaves them
    client.write(f"{RDZV}/{live}", "state", ttl=60)
    client.write(f"{STORE}/{busy}/ab/cd/key", "1", ttl=60)
    deleted = sweep_once(Upstream([etcd.endpoint]))
    # The run without state: all of it; the live run: its empty sub-directories only; the run with a
    # key (and no state): nothing on the key's path.
    assert {f"{STORE}/{done}", f"{STORE}/{done}/ab", f"{STORE}/{done}/ab/cd"} <= set(deleted)
    assert not exists(client, f"{STORE}/{done}")
    assert exists(client, f"{STORE}/{live}") and not exists(client, f"{STORE}/{live}/ab")
    assert client.read(f"{STORE}/{busy}/ab/cd/key").value == "1"
    assert not {key for key in deleted if key.startswith(f"{STORE}/{busy}")}
    assert not {key for key in sweep_once(Upstream([etcd.endpoint])) if tag in key}  # nothing left to delete


def test_a_finished_runs_store_goes_and_the_run_can_come_back(etcd, monkeypatch):
    # The whole life through the gate: a round, its keys expire, its state goes (torch's TTL is 2 h:
    # deleted here as its expiry would), the sweep deletes the directory; the same run id (a
    # restart-mode job's pods keep theirs) forms a round again.
    monkeypatch.setattr(rdzv_store_ttl, "STORE_TTL_S", 2)
    run_id = f"back-{uuid.uuid4().hex[:8]}"
    gate = serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static({"127.0.0.1": run_id}), Limits())
    try:
        endpoint = f"127.0.0.1:{gate.server_address[1]}"
        client = client_of(etcd.endpoint)
        for _round in range(2):
            handler = rdzv_store_ttl.create_handler(params(endpoint, run_id, 1, 1))
            assert rendezvous([handler])[0].world_size == 1
            handler.shutdown()
            assert exists(client, f"{STORE}/{run_id}")
            client.delete(f"{RDZV}/{run_id}")
            deadline = 60  # the keys expire on etcd's next sync after 2 s; a hang detector only
            while exists(client, f"{STORE}/{run_id}"):
                sweep_once(Upstream([etcd.endpoint]))
                deadline -= 1
                assert deadline, client.read(f"{STORE}/{run_id}", recursive=True)
                threading.Event().wait(0.5)
    finally:
        gate.shutdown()
        gate.server_close()


class SweptBeforeEachWrite(python_etcd.Client):
    """A client through which the sweep runs between the store's making its directory and the next
    ``sweeps`` key writes: the worst moment, made certain."""

    def __init__(self, endpoint: str, etcd_endpoint: str, sweeps: int):
        host, port = endpoint.split(":")
        super().__init__(host=host, port=int(port))
        self.upstream, self.sweeps, self.swept = Upstream([etcd_endpoint]), sweeps, []

    def write(self, key, value, ttl=None, dir=False, append=False, **kwdargs):
        if not dir and self.sweeps:
            self.sweeps -= 1
            self.swept += sweep_once(self.upstream)
        return super().write(key, value, ttl=ttl, dir=dir, append=append, **kwdargs)


@pytest.mark.parametrize("write", ["set", "add"])
@pytest.mark.parametrize("sweeps", [1, rdzv_store_ttl.DIRECTORY_TRIES - 1])
def test_a_directory_swept_before_a_write_is_made_again(etcd, sweeps, write):
    # No state is written, so each sweep deletes the run's directory, empty, right before the write.
    run_id = f"race-{uuid.uuid4().hex[:8]}"
    gate = serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static({"127.0.0.1": run_id}), Limits())
    try:
        client = SweptBeforeEachWrite(f"127.0.0.1:{gate.server_address[1]}", etcd.endpoint, sweeps)
        store = rdzv_store_ttl.ExpiringEtcdStore(client, f"{STORE}/{run_id}", ttl_s=60)
        if write == "set":
            store.set("k", "v")
            assert store.get("k") == b"v"
        else:
            assert store.add("n", 2) == 2
        assert f"{STORE}/{run_id}" in client.swept and client.sweeps == 0  # the sweep did delete it
    finally:
        gate.shutdown()
        gate.server_close()


def test_a_directory_swept_before_every_try_fails_the_write(etcd):
    run_id = f"lost-{uuid.uuid4().hex[:8]}"
    gate = serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static({"127.0.0.1": run_id}), Limits())
    try:
        client = SweptBeforeEachWrite(f"127.0.0.1:{gate.server_address[1]}", etcd.endpoint, 99)
        store = rdzv_store_ttl.ExpiringEtcdStore(client, f"{STORE}/{run_id}", ttl_s=60)
        with pytest.raises(python_etcd.EtcdKeyNotFound, match="create /torch/elastic/store/"):
            store.set("k", "v")
        assert client.sweeps == 99 - rdzv_store_ttl.DIRECTORY_TRIES
    finally:
        gate.shutdown()
        gate.server_close()


def test_a_sweep_interval_below_a_second_is_allowed_but_none_is_refused():
    with pytest.raises(ValueError, match="interval_s must be > 0 seconds"):
        Sweeper(Upstream(["127.0.0.1:1"]), interval_s=0)
