"""The etcd-v2 rendezvous store's keys expire (elastic_trainer/launch/rdzv_store_ttl.py), on the real etcd.

Regression (issue 19): keys under /torch/elastic/store never expired (25 keys after 5 short jobs):
torch's etcd-v2 backend hands the agents an EtcdStore that writes without a TTL. Each test runs a
real one-node rendezvous (torch's own handler, as torchrun builds it) against the session's etcd and
reads what it left in etcd. Every test runs on etcd 3.4 and 3.5 (``each_etcd``): a run's store
directory was renewed with dir=true&ttl=..&prevExist=true, which 3.4 accepts and 3.5 refuses ("Not a
file"), so every restart-mode job failed its first rendezvous on the platform's etcd 3.5.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import urllib.request
import uuid

import etcd as python_etcd  # the `etcd` fixture is the server
import pytest
from elastic_trainer.launch import rdzv_store_ttl
from torch.distributed.elastic.rendezvous import RendezvousParameters, rendezvous_handler_registry
from torch.distributed.elastic.rendezvous.registry import _create_etcd_v2_handler

STORE = "/torch/elastic/store"


@pytest.fixture
def etcd(each_etcd):
    return each_etcd


def version(etcd_server) -> str:
    with urllib.request.urlopen(f"http://{etcd_server.endpoint}/version", timeout=10) as answer:
        return json.load(answer)["etcdserver"]


def params(etcd_server, run_id: str) -> RendezvousParameters:
    return RendezvousParameters(
        backend="etcd-v2", endpoint=etcd_server.endpoint, run_id=run_id, min_nodes=1, max_nodes=1, last_call_timeout=1
    )


def one_round(handler) -> None:
    """A rendezvous of one node, then its end, as an agent whose run finished does."""
    handler.next_rendezvous()
    handler.shutdown()


def etcd_client(etcd_server) -> python_etcd.Client:
    host, port = etcd_server.endpoint.split(":")
    return python_etcd.Client(host=host, port=int(port))


def store_keys(etcd_server, run_id: str) -> dict[str, int | None]:
    """The run's keys under the store prefix (their names are base64), with their TTLs."""
    try:
        nodes = etcd_client(etcd_server).read(STORE, recursive=True).leaves
    except python_etcd.EtcdKeyNotFound:
        return {}
    found = {}
    for node in nodes:
        # torch's layout, STORE/<base64 key>, or the launcher's, STORE/<run id>/<base64 key>; base64
        # may hold "/" (sub-directories); other tests' keys may be no base64 at all.
        relative = node.key[len(STORE) + 1 :]
        if relative.startswith(run_id + "/"):
            relative = relative[len(run_id) + 1 :]
        try:
            name = base64.b64decode(relative, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            continue
        if run_id in name:
            found[name] = node.ttl
    return found


def test_torch_leaves_the_store_keys_forever(etcd):
    # What the launcher got before: the check below can fail.
    run_id = f"plain-{uuid.uuid4().hex[:8]}"
    one_round(_create_etcd_v2_handler(params(etcd, run_id)))
    keys = store_keys(etcd, run_id)
    assert keys and set(keys.values()) == {None}, keys


def test_every_store_key_expires(etcd):
    run_id = f"ttl-{uuid.uuid4().hex[:8]}"
    one_round(rdzv_store_ttl.create_handler(params(etcd, run_id)))
    keys = store_keys(etcd, run_id)
    assert keys, "the rendezvous wrote no store key: nothing was checked"
    assert all(ttl is not None and 0 < ttl <= rdzv_store_ttl.STORE_TTL_S for ttl in keys.values()), keys


def test_the_keys_are_gone_once_their_ttl_passed(etcd, monkeypatch):
    monkeypatch.setattr(rdzv_store_ttl, "STORE_TTL_S", 3)
    run_ids = [f"gone-{i}-{uuid.uuid4().hex[:8]}" for i in range(5)]  # five short jobs
    for run_id in run_ids:
        one_round(rdzv_store_ttl.create_handler(params(etcd, run_id)))
        assert store_keys(etcd, run_id), "the rendezvous wrote no store key: nothing was checked"
    deadline = time.monotonic() + 30  # etcd expires v2 keys on the leader's next sync (every 500 ms)
    while left := {run_id: keys for run_id in run_ids if (keys := store_keys(etcd, run_id))}:
        assert time.monotonic() < deadline, left
        time.sleep(0.5)


def test_add_counts_and_expires(etcd):
    store = rdzv_store_ttl.ExpiringEtcdStore(etcd_client(etcd), STORE, ttl_s=60)
    key = f"barrier-{uuid.uuid4().hex[:8]}"
    assert [store.add(key, 1) for _ in range(3)] == [1, 2, 3]
    assert 0 < store_keys(etcd, key)[key] <= 60


def test_each_run_has_a_store_directory_of_its_own(etcd):
    # Its own prefix (etcd-gate lets a pod reach only its run's paths), with no TTL: etcd 3.5 cannot
    # renew one, and etcd-gate's sweep deletes it once empty and the run's state is gone.
    run_id = f"dir-{uuid.uuid4().hex[:8]}"
    one_round(rdzv_store_ttl.create_handler(params(etcd, run_id)))
    directory = etcd_client(etcd).read(f"{STORE}/{run_id}")
    assert directory.dir and directory.ttl is None
    assert store_keys(etcd, run_id)


def test_a_directory_ttl_is_renewed_on_etcd_3_4_only(etcd):
    # Why the store directory has no TTL: the renewal the launcher made is refused by etcd 3.5
    # (v2store Update writes the node; node.Write refuses a directory). Pins the etcd under test.
    client, directory = etcd_client(etcd), f"{STORE}/renew-{uuid.uuid4().hex[:8]}"
    client.write(directory, None, dir=True, ttl=60, prevExist=False)
    if version(etcd).startswith("3.4."):
        assert client.write(directory, None, dir=True, ttl=120, prevExist=True).ttl > 60
    else:
        assert version(etcd).startswith("3.5."), version(etcd)
        for form in ({"dir": True, "ttl": 120}, {"dir": True, "ttl": 120, "refresh": True}, {"ttl": 120}):
            with pytest.raises(python_etcd.EtcdException, match="Not a file"):
                client.write(directory, None, prevExist=True, **form)


def test_a_store_whose_directory_was_deleted_makes_it_again(etcd):
    # etcd-gate's sweep may delete it, empty, between the store's making it and a write.
    client, prefix = etcd_client(etcd), f"{STORE}/again-{uuid.uuid4().hex[:8]}"
    store = rdzv_store_ttl.ExpiringEtcdStore(client, prefix, ttl_s=60)
    store.set("a", "1")
    client.delete(prefix, recursive=True, dir=True)
    store.set("b", "2")
    assert store.add("c", 5) == 5
    assert client.read(prefix).dir and store.get("b") == b"2"


def test_install_makes_torchruns_etcd_v2_expire(etcd, monkeypatch):
    monkeypatch.setitem(rendezvous_handler_registry._registry, "etcd-v2", _create_etcd_v2_handler)
    rdzv_store_ttl.install()
    rdzv_store_ttl.install()  # idempotent
    run_id = f"installed-{uuid.uuid4().hex[:8]}"
    one_round(rendezvous_handler_registry.create_handler(params(etcd, run_id)))
    keys = store_keys(etcd, run_id)
    assert keys and all(ttl for ttl in keys.values()), keys


def test_a_ttl_below_one_second_is_refused(etcd):
    with pytest.raises(ValueError, match="ttl_s must be a whole number of seconds >= 1"):
        rdzv_store_ttl.ExpiringEtcdStore(etcd_client(etcd), STORE, ttl_s=0)
