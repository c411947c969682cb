"""etcd-gate (elastic_trainer/etcd_gate) in front of the real etcd, with torch's real etcd-v2 rendezvous.

The finding it closes: with etcd's v2 API open, any pod could ``DELETE /v2/keys/torch?recursive=true``
(every job's rendezvous at once) and write without bound (the v2 store is in memory, outside the
backend quota). Through the gate a pod reaches only its own run's paths, every write expires, and
values, keys and bodies are bounded. The rendezvous nodes connect from 127.0.0.1 (their run), the
other pod from 127.0.0.2: the gate tells them apart by source address, as it tells pods by IP.
Each test runs on etcd 3.4 and the platform's 3.5 (``each_etcd``): the run's store directory was
written in a way only 3.4 accepts (launch/rdzv_store_ttl.py).
"""

from __future__ import annotations

import http.client
import json
import pickle
import socket
import threading
import uuid
from base64 import b64encode
from datetime import UTC, datetime
from urllib.parse import urlencode

import etcd as python_etcd  # the `etcd` fixture is the server
import pytest
from elastic_trainer.etcd_gate import Limits, Upstream, serve
from elastic_trainer.etcd_gate.__main__ import main as gate_main
from elastic_trainer.etcd_gate.budget import WRITE_FLOOR, Rate
from elastic_trainer.etcd_gate.resolvers import Static
from elastic_trainer.etcd_gate.rules import MAX_STORE_KEY_LEVELS
from elastic_trainer.etcd_gate.server import MAX_CONNECTIONS_PER_ADDRESS
from elastic_trainer.etcd_gate.sweep import Sweeper, sweep_once
from elastic_trainer.launch import rdzv_store_ttl
from elastic_trainer.local import Etcd, LocalJob
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState
from torch.distributed.elastic.rendezvous.etcd_rendezvous_backend import EtcdRendezvousBackend

from torchfleet.jobs.flag_checks import MAX_NODES

OTHER = "127.0.0.2"  # another pod: a loopback address of its own


@pytest.fixture
def etcd(each_etcd):
    return each_etcd


@pytest.fixture
def run_id() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def gate(etcd, run_id):
    def start(limits: Limits | None = None):
        server = serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static({"127.0.0.1": run_id}), limits or Limits())
        started.append(server)
        return f"127.0.0.1:{server.server_address[1]}"

    started: list = []
    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def ask(endpoint: str, method: str, path: str, source: str = "127.0.0.1", **form) -> tuple[int, dict]:
    host, port = endpoint.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(source, 0))
    body = urlencode(form) if form else None
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, json.loads(answer) if answer.startswith(b"{") else {"text": answer.decode()}


def params(endpoint: str, run_id: str, min_nodes: int, max_nodes: int) -> RendezvousParameters:
    return RendezvousParameters(
        backend="etcd-v2",
        endpoint=endpoint,
        run_id=run_id,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        last_call_timeout=1,
        join_timeout=60,
    )


def rendezvous(handlers) -> list:
    """next_rendezvous on every handler at once, as agents do; their results (or the exceptions raised)."""
    results: list = [None] * len(handlers)

    def enter(i):
        try:
            results[i] = handlers[i].next_rendezvous()
        except Exception as error:
            results[i] = error

    threads = [threading.Thread(target=enter, args=(i,)) for i in range(len(handlers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)  # a hang detector only
    assert not any(t.is_alive() for t in threads), "a rendezvous did not return in 120 s"
    assert not any(isinstance(r, Exception) for r in results), results
    return results


def test_without_the_gate_any_client_wipes_every_run(run_id):
    # The finding, on the real etcd: this is what the gate must refuse. An etcd of its own: the
    # session's serves the other tests' runs.
    with Etcd() as etcd:
        _wipe(etcd, run_id)


def _wipe(etcd, run_id):
    handler = rdzv_store_ttl.create_handler(params(etcd.endpoint, run_id, 1, 1))
    rendezvous([handler])
    handler.shutdown()
    status, _ = ask(etcd.endpoint, "DELETE", "/v2/keys/torch?recursive=true", source=OTHER)
    assert status == 200
    status, _ = ask(etcd.endpoint, "GET", f"/v2/keys/torch/elastic/rendezvous/{run_id}")
    assert status == 404


def test_a_rendezvous_forms_and_reforms_through_the_gate(gate, run_id):
    endpoint = gate()
    nodes = [rdzv_store_ttl.create_handler(params(endpoint, run_id, 2, 3)) for _ in range(2)]
    first = rendezvous(nodes)
    assert sorted(r.rank for r in first) == [0, 1] and {r.world_size for r in first} == {2}
    # Another pod cannot wipe it, nor read it, nor write into it.
    assert ask(endpoint, "DELETE", "/v2/keys/torch?recursive=true", source=OTHER)[0] == 403
    assert ask(endpoint, "DELETE", f"/v2/keys/torch/elastic/rendezvous/{run_id}", source=OTHER)[0] == 403
    assert ask(endpoint, "GET", f"/v2/keys/torch/elastic/store/{run_id}", source=OTHER)[0] == 403
    assert (
        ask(endpoint, "PUT", f"/v2/keys/torch/elastic/rendezvous/{run_id}", source=OTHER, value="x", ttl=60)[0] == 403
    )
    # Nor can the run's own pods reach past their run.
    assert ask(endpoint, "DELETE", "/v2/keys/torch?recursive=true")[0] == 403
    assert ask(endpoint, "GET", "/v2/keys/torch/elastic/store")[0] == 403
    assert ask(endpoint, "GET", "/v3/kv/range")[0] == 403
    status, answer = ask(endpoint, "GET", f"/v2/keys/torch/elastic/rendezvous/{run_id}")
    assert status == 200 and 0 < answer["node"]["ttl"] <= 7200
    # The state is intact: the group re-forms (both re-enter, as their agents do when a worker fails)
    # into a new round, which reads and writes the store again.
    second = rendezvous(nodes)
    assert sorted(r.rank for r in second) == [0, 1] and {r.world_size for r in second} == {2}
    status, answer = ask(endpoint, "GET", f"/v2/keys/torch/elastic/store/{run_id}?recursive=true")
    assert status == 200 and answer["node"]["dir"] and "ttl" not in answer["node"]  # the sweep's (sweep.py)
    keys = []
    walk = [answer["node"]]
    while walk:
        node = walk.pop()
        walk += node.get("nodes") or []
        keys += [] if node.get("dir") else [node]
    assert keys and all(0 < key["ttl"] <= 7200 for key in keys), keys
    for node in nodes:
        node.shutdown()


def test_writes_are_bounded(gate, run_id):
    endpoint = gate(Limits(max_value_bytes=1024, max_store_keys=3, max_ttl_s=60))
    state = f"/v2/keys/torch/elastic/rendezvous/{run_id}"
    store = f"/v2/keys/torch/elastic/store/{run_id}"
    assert ask(endpoint, "PUT", state, value="x")[0] == 400  # no TTL: it would stay for good
    assert ask(endpoint, "PUT", state, value="x", ttl="")[0] == 400  # v2's "remove the TTL"
    assert ask(endpoint, "PUT", state, value="x", ttl=61)[0] == 400
    assert ask(endpoint, "PUT", state, value="x" * 1025, ttl=60)[0] == 413
    assert ask(endpoint, "PUT", state, value="x" * 1024, ttl=60)[0] == 201
    assert ask(endpoint, "POST", state, value="x", ttl=60)[0] == 403
    # Store keys only inside the run's directory, created once without a TTL (etcd 3.5 cannot renew
    # one; the sweep deletes it), and at most 3 of them.
    status, answer = ask(endpoint, "PUT", f"{store}/a", value="1", ttl=60)
    assert status == 404 and answer["errorCode"] == 100  # etcd's "Key not found": the store makes it
    assert ask(endpoint, "PUT", store, dir="true")[0] == 400  # an update, which etcd 3.5 refuses
    assert ask(endpoint, "PUT", store, dir="true", ttl=60, prevExist="false")[0] == 400
    assert ask(endpoint, "PUT", store, value="x", prevExist="false")[0] == 400
    assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 201
    assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 412  # etcd's: it exists
    assert [ask(endpoint, "PUT", f"{store}/{k}", value="1", ttl=60)[0] for k in "abc"] == [201] * 3
    status, answer = ask(endpoint, "PUT", f"{store}/d", value="1", ttl=60)
    assert status == 507 and "3 keys" in answer["message"]
    assert ask(endpoint, "PUT", f"{store}/a", value="2", ttl=60)[0] == 200  # an update is no new key
    assert ask(endpoint, "PUT", f"{store}/x/y", value="1", ttl=60, dir="true")[0] == 400
    # A body far over the limit is refused before it is read.
    status, _ = ask(endpoint, "PUT", state, value="x" * 10_000, ttl=60)
    assert status == 413


def test_a_runs_store_is_bounded_in_bytes(gate, run_id):
    # A hostile run at the key count alone: 1,500 store values of 64 KiB took etcd from 23 to 828 MiB
    # resident (bench/etcd_memory.py). Store values are tens to hundreds of bytes (torch's EtcdStore:
    # addresses, ports, role infos), so they have a limit of their own below the state's, and the run's
    # store a limit in bytes (names and values) beside its count of keys.
    endpoint = gate(Limits(max_value_bytes=4096, max_store_value_bytes=200, max_store_bytes=1000))
    state = f"/v2/keys/torch/elastic/rendezvous/{run_id}"
    store = f"/v2/keys/torch/elastic/store/{run_id}"
    assert ask(endpoint, "PUT", state, value="x" * 4096, ttl=60)[0] == 201  # the state keeps its own limit
    assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 201
    status, answer = ask(endpoint, "PUT", f"{store}/big", value="x" * 201, ttl=60)
    assert (status, answer["errorCode"]) == (413, 209) and "a store value may be at most 200 bytes" in answer["message"]
    assert ask(endpoint, "PUT", f"{store}/big", value="x" * 100, ttl=60)[0] == 201
    name = f"/torch/elastic/store/{run_id}/k"  # etcd's key: the path under /v2/keys
    held = len(f"{name[:-1]}big") + 100
    written = 0
    while held + len(f"{name}{written}") + 100 <= 1000:
        assert ask(endpoint, "PUT", f"{store}/k{written}", value="y" * 100, ttl=60)[0] == 201
        held, written = held + len(f"{name}{written}") + 100, written + 1
    status, answer = ask(endpoint, "PUT", f"{store}/k{written}", value="y" * 100, ttl=60)
    assert (status, answer["errorCode"]) == (507, 209), answer
    assert f"holds {held} bytes" in answer["message"] and "1000, the most a run may hold" in answer["message"]
    # An update counts its new value in place of the old one: a smaller one frees bytes, to the byte.
    assert ask(endpoint, "PUT", f"{store}/big", value="x" * 100, ttl=60)[0] == 200
    assert ask(endpoint, "PUT", f"{store}/big", value="x", ttl=60)[0] == 200
    fits = 1000 - (held - 99) - len(f"{name}{written}")
    assert ask(endpoint, "PUT", f"{store}/k{written}", value="y" * (fits + 1), ttl=60)[0] == 507
    assert ask(endpoint, "PUT", f"{store}/k{written}", value="y" * fits, ttl=60)[0] == 201
    assert ask(endpoint, "PUT", f"{store}/k{written + 1}", value="", ttl=60)[0] == 507


def test_the_largest_jobs_rendezvous_state_fits(gate, run_id):
    # The state's limit is tied to the largest job the CLI submits (flag_checks.MAX_NODES): torch 2.13's own
    # state for that many nodes in a round, as many replacements waiting (a job whose every pod was replaced
    # before the old ones' heartbeats expired), IPv6 pod addresses (torchrun's --local-addr is the pod IP)
    # and the largest pids, written by torch's own etcd-v2 backend through the gate at its default limits.
    state = _RendezvousState()
    state.round, state.complete, state.deadline = 2**31, True, datetime.now(UTC)
    nodes = [_NodeDesc(f"fd00:ffff:ffff:ffff:ffff:ffff:{i:04x}:ffff", 4_194_304 - i, i) for i in range(2 * MAX_NODES)]
    state.participants = {node: rank for rank, node in enumerate(nodes[:MAX_NODES])}
    state.wait_list = set(nodes[MAX_NODES:])
    state.last_heartbeats = {node: datetime.now(UTC) for node in nodes}
    bits = pickle.dumps(state)  # as torch's _BackendRendezvousStateHolder.sync
    size = len(b64encode(bits))  # as EtcdRendezvousBackend.set_state
    assert size <= Limits().max_value_bytes, f"{MAX_NODES} nodes' state is {size} bytes"
    host, port = gate().split(":")
    backend = EtcdRendezvousBackend(python_etcd.Client(host=host, port=int(port)), run_id, "/torch/elastic/rendezvous")
    written, token, ok = backend.set_state(bits)
    assert ok and written == bits and backend.set_state(bits, token)[2]  # written, then rewritten (a heartbeat)


def test_a_runs_writes_are_bounded_per_second(etcd, run_id):
    # The finding: the gate let a run rewrite its 64 KiB state at any rate, and 15,000 rewrites in 75 s took
    # etcd to 1,308 MiB resident, past its 1 GiB (bench/etcd_memory.py). Now each run, and all runs through a
    # gate, spend from a bucket of bytes per second. At 1 byte a second nothing refills within the test.
    other = f"other-{uuid.uuid4().hex[:8]}"
    # A write costs at least WRITE_FLOOR (8 KiB): two fit in the run's burst, three in the gate's.
    limits = Limits(max_value_bytes=4000, max_run_write_bytes_per_s=1, max_run_write_burst_bytes=2 * WRITE_FLOOR + 100,
                    max_gate_write_bytes_per_s=1, max_gate_write_burst_bytes=3 * WRITE_FLOOR + 100)  # fmt: skip
    server = serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static({"127.0.0.1": run_id, OTHER: other}), limits)
    endpoint = f"127.0.0.1:{server.server_address[1]}"
    try:
        state, theirs = f"/v2/keys/torch/elastic/rendezvous/{run_id}", f"/v2/keys/torch/elastic/rendezvous/{other}"
        assert [ask(endpoint, "PUT", state, value="x" * 4000, ttl=60)[0] for _ in range(2)] == [201, 200]
        status, answer = ask(endpoint, "PUT", state, value="x" * 4000, ttl=60)
        assert (status, answer["errorCode"]) == (429, 209), answer
        assert f"the run {run_id} writes more than 1 bytes a second" in answer["message"]
        assert ask(endpoint, "DELETE", state)[0] == 429  # a delete is a raft entry too (WRITE_FLOOR)
        assert ask(endpoint, "GET", state)[0] == 200  # reads keep nothing: never refused for the rate
        # Another run has its own bucket; the gate's, shared by all runs, then runs out.
        assert ask(endpoint, "PUT", theirs, source=OTHER, value="y" * 4000, ttl=60)[0] == 201
        status, answer = ask(endpoint, "PUT", theirs, source=OTHER, value="y" * 4000, ttl=60)
        assert status == 429 and "all runs together write more than 1 bytes a second" in answer["message"], answer
        assert ask(etcd.endpoint, "GET", state)[1]["node"]["value"] == "x" * 4000  # refused writes never reached etcd
    finally:
        server.shutdown()
        server.server_close()


def test_a_bucket_refills_at_its_rate():
    now = [0.0]
    rate = Rate(run_rate=1000, run_burst=3000, gate_rate=10**9, gate_burst=10**9, clock=lambda: now[0])
    assert [rate.take("r", 1000) for _ in range(3)] == [None] * 3
    assert "the run r writes more than 1000 bytes a second" in rate.take("r", 1000)
    now[0] += 0.5
    assert rate.take("r", 1000) is not None  # half refilled
    now[0] += 0.5
    assert rate.take("r", 1000) is None
    now[0] += 3600
    taken = [rate.take("r", 1000) for _ in range(4)]
    assert taken[:3] == [None] * 3 and taken[3] is not None  # never more than the burst


def test_what_all_runs_hold_is_bounded(etcd, run_id):
    # Run ids are as many as jobs started, each holding its state and store for 2 h: nothing bounded their sum.
    # Now a replica counts what all runs hold (its last sweep's read, then what it let through) and refuses a
    # write that would grow it past max_held_bytes; updates that do not grow a key always pass.
    other = f"other-{uuid.uuid4().hex[:8]}"
    mine, theirs = f"/torch/elastic/rendezvous/{run_id}", f"/torch/elastic/rendezvous/{other}"
    limits = Limits(max_value_bytes=1000, max_held_bytes=len(mine) + len(theirs) + 1500)
    with Etcd(etcd.binary) as own:  # an etcd of its own: the session's holds other tests' keys, expiring meanwhile
        upstream = Upstream([own.endpoint])
        server = serve(("127.0.0.1", 0), upstream, Static({"127.0.0.1": run_id, OTHER: other}), limits)
        try:
            _hold(own, server, f"127.0.0.1:{server.server_address[1]}", mine, theirs)
        finally:
            server.shutdown()
            server.server_close()


def _hold(etcd, server, endpoint, mine, theirs):
    sweep_once(server.upstream, server.held)  # as the gate starts (__main__ count_held): etcd holds nothing
    assert server.held.total == 0
    assert ask(endpoint, "PUT", "/v2/keys" + mine, value="x" * 1000, ttl=60)[0] == 201
    status, answer = ask(endpoint, "PUT", "/v2/keys" + theirs, source=OTHER, value="y" * 1000, ttl=60)
    assert (status, answer["errorCode"]) == (507, 209), answer
    assert "the most this gate lets them hold" in answer["message"]
    assert ask(endpoint, "PUT", "/v2/keys" + theirs, source=OTHER, value="y" * 500, ttl=60)[0] == 201
    assert ask(endpoint, "PUT", "/v2/keys" + mine, value="z" * 1000, ttl=60)[0] == 200  # no growth: passes
    assert ask(endpoint, "PUT", "/v2/keys" + theirs, source=OTHER, value="y" * 501, ttl=60)[0] == 507
    assert ask(endpoint, "DELETE", "/v2/keys" + mine)[0] == 200  # a delete gives its bytes back
    assert ask(endpoint, "PUT", "/v2/keys" + theirs, source=OTHER, value="y" * 1000, ttl=60)[0] == 200
    # Another replica's writes reach this one's count at its next sweep: a third run's, straight to etcd.
    third = f"/v2/keys/torch/elastic/rendezvous/third-{uuid.uuid4().hex[:8]}"
    assert ask(etcd.endpoint, "PUT", third, value="w" * 1000, ttl=60)[0] == 201
    assert ask(endpoint, "PUT", "/v2/keys" + mine, value="x" * 400, ttl=60)[0] == 201
    sweep_once(server.upstream, server.held)
    assert ask(endpoint, "PUT", "/v2/keys" + mine, value="x" * 500, ttl=60)[0] == 507


def test_a_deep_store_key_is_refused_and_its_directories_count(etcd, run_id):
    # The finding (hostile researcher): a store key's '/'s are directories in etcd's v2 store, each kept with its
    # whole path and past the key's TTL, and the gate counted only the key. One PUT of 1,950 levels (a 3.9 KB
    # request line, under the 4,096 bytes etcd reads of one) was let through (201): etcd made 3.8 MB of directory
    # paths, and every later read of that tree passed json.loads' recursion limit: the run's own store read, the
    # sweep (its thread died) and the count at the gate's start (the gate did not start: every run refused).
    store = f"/v2/keys/torch/elastic/store/{run_id}"
    deep = f"{store}/0" + "/a" * 1950
    with Etcd(etcd.binary) as own:  # an etcd of its own: the deep tree would break the session's sweeps
        upstream = Upstream([own.endpoint])
        servers = [serve(("127.0.0.1", 0), upstream, Static({"127.0.0.1": run_id}), limits)
                   for limits in (Limits(), Limits(max_store_bytes=1500))]  # fmt: skip
        try:
            endpoint = f"127.0.0.1:{servers[0].server_address[1]}"  # the deployed limits
            assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 201
            status, answer = ask(endpoint, "PUT", deep, value="1", ttl=60)
            assert (status, answer.get("errorCode")) == (400, 209), (status, answer)
            levels = f"at most {MAX_STORE_KEY_LEVELS} levels below /torch/elastic/store/{run_id}, got 1951"
            assert levels in answer["message"]
            # Within the levels, the directories count against the run's bytes and what all runs hold: the key
            # and value alone (80 bytes) fit in 1,500 many times; with its 15 directories' paths (840 bytes), not twice.
            server = servers[1]
            endpoint = f"127.0.0.1:{server.server_address[1]}"
            nested = f"{store}/d" + "/bb" * 14 + "/k"
            assert ask(endpoint, "PUT", nested, value="1", ttl=60)[0] == 201
            paths = [f"/torch/elastic/store/{run_id}/d" + "/bb" * i for i in range(15)]
            assert server.held.total == len(nested) - len("/v2/keys") + 1 + sum(len(p) for p in paths)
            status, answer = ask(endpoint, "PUT", f"{store}/e" + "/bb" * 14 + "/k", value="1", ttl=60)
            assert (status, answer["errorCode"]) == (507, 209) and "the most a run may hold" in answer["message"]
            sweep_once(upstream, server.held)  # a sweep's read counts the same bytes as the writes did
            assert server.held.total == len(nested) - len("/v2/keys") + 1 + sum(len(p) for p in paths)
            # A tree that deep already in etcd (written before this gate, or around it) stops neither the sweep's
            # thread nor the gate's start.
            assert ask(own.endpoint, "PUT", deep, value="1", ttl=60)[0] == 201
            sweeper = Sweeper(upstream, 0.05, server.held).start()
            threading.Event().wait(0.5)
            assert sweeper._thread.is_alive()
            sweeper.stop()
        finally:
            for server in servers:
                server.shutdown()
                server.server_close()


def test_a_ttl_refresh_cannot_hide_what_a_run_holds(etcd, run_id):
    # The finding (hostile researcher): etcd's v2 refresh (refresh=true, a TTL and no value) keeps the key's value,
    # and the gate counted the write as an empty value: after one refresh its count had forgotten the 1,000 bytes
    # etcd still held, and another run's 1,000 were let through past max_held_bytes (so any number of runs could
    # fill etcd that way). torch never refreshes (its backend and EtcdStore write values), so it is refused.
    other = f"other-{uuid.uuid4().hex[:8]}"
    mine, theirs = f"/torch/elastic/rendezvous/{run_id}", f"/torch/elastic/rendezvous/{other}"
    limits = Limits(max_value_bytes=1000, max_held_bytes=len(mine) + len(theirs) + 1500)
    with Etcd(etcd.binary) as own:
        server = serve(("127.0.0.1", 0), Upstream([own.endpoint]), Static({"127.0.0.1": run_id, OTHER: other}), limits)
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        try:
            assert ask(endpoint, "PUT", "/v2/keys" + mine, value="x" * 1000, ttl=60)[0] == 201
            status, answer = ask(endpoint, "PUT", "/v2/keys" + mine, refresh="true", ttl=60, prevExist="true")
            assert (status, answer.get("errorCode")) == (400, 209), (status, answer)
            assert "refresh" in answer["message"]
            assert ask(own.endpoint, "GET", "/v2/keys" + mine)[1]["node"]["value"] == "x" * 1000  # still held
            status, answer = ask(endpoint, "PUT", "/v2/keys" + theirs, source=OTHER, value="y" * 1000, ttl=60)
            assert (status, answer["errorCode"]) == (507, 209), answer
        finally:
            server.shutdown()
            server.server_close()


def test_writes_etcd_refuses_hold_nothing(etcd, run_id):
    # The finding (hostile researcher): the gate counted a write against what all runs hold before etcd answered,
    # and kept the count when etcd refused it. A run's compare-and-swaps that cannot succeed (prevValue on keys
    # that do not exist: etcd's 100 "Key not found") filled max_held_bytes while etcd held nothing, and another
    # run's state was refused 507 ("all runs together hold ...": untrue) until the next sweep, again and again.
    other = f"other-{uuid.uuid4().hex[:8]}"
    store, theirs = f"/v2/keys/torch/elastic/store/{run_id}", f"/v2/keys/torch/elastic/rendezvous/{other}"
    limits = Limits(max_value_bytes=1000, max_store_value_bytes=1000, max_held_bytes=2000)
    with Etcd(etcd.binary) as own:
        server = serve(("127.0.0.1", 0), Upstream([own.endpoint]), Static({"127.0.0.1": run_id, OTHER: other}), limits)
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        try:
            assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 201
            for k in range(3):
                status, answer = ask(endpoint, "PUT", f"{store}/k{k}", value="x" * 1000, ttl=60, prevValue="none")
                assert (status, answer.get("errorCode")) == (404, 100), (k, status, answer)  # etcd's own refusal
            assert server.held.total == 0
            assert ask(endpoint, "PUT", theirs, source=OTHER, value="y" * 1000, ttl=60)[0] == 201
            assert ask(endpoint, "PUT", theirs, source=OTHER, value="y" * 10, ttl=60, prevValue="z")[0] == 412
            assert server.held.total == len(theirs) - len("/v2/keys") + 1000  # the value etcd kept, not the refused one
        finally:
            server.shutdown()
            server.server_close()


def test_one_pod_holds_a_bounded_number_of_connections(gate, run_id):
    # The finding (hostile researcher): reads are free and connections were not bounded, and a watch (wait=true)
    # is held until an event: one pod's 2,000 watches took the gate from 23 to 103 MB resident (about 40 KB each,
    # its limit 512 MiB) and etcd from 29 to 96 MB. Now a pod holds at most MAX_CONNECTIONS_PER_ADDRESS connections
    # to a replica; one more is answered once, refused, and closed; other pods are served meanwhile.
    endpoint = gate()
    host, port = endpoint.split(":")
    state = f"/v2/keys/torch/elastic/rendezvous/{run_id}"
    watches = []
    try:
        for _ in range(MAX_CONNECTIONS_PER_ADDRESS):
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            connection.request("GET", f"{state}?wait=true")
            watches.append(connection)
        for _ in range(200):  # the gate accepts them one by one; 10 s at any load
            status, answer = ask(endpoint, "GET", state)
            if status == 429:
                break
            threading.Event().wait(0.05)
        assert (status, answer["errorCode"]) == (429, 209), (status, answer)
        assert f"127.0.0.1 holds {MAX_CONNECTIONS_PER_ADDRESS} connections to this gate" in answer["message"]
        assert ask(endpoint, "GET", state, source=OTHER)[0] == 403  # another pod is still answered (not its run)
    finally:
        for connection in watches:
            connection.close()
    for _ in range(100):  # the gate sees them closed
        if ask(endpoint, "GET", state)[0] != 429:
            break
        threading.Event().wait(0.05)
    assert ask(endpoint, "GET", state)[0] in (200, 404)


def test_a_watch_whose_client_went_away_is_ended(gate, run_id):
    # The finding (hostile researcher): etcd holds a watch until an event, and the gate held its side as long,
    # whether or not the client was still there: 1,000 watches opened and closed in a loop by one pod left 1,000
    # threads in the gate and a connection and watcher each in etcd (+39 and +33 MB), with no socket left open.
    endpoint = gate()
    host, port = endpoint.split(":")
    before = threading.active_count()
    clients = []
    for _ in range(20):
        client = socket.create_connection((host, int(port)))
        client.sendall(f"GET /v2/keys/torch/elastic/rendezvous/{run_id}?wait=true HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        clients.append(client)
    waited = threading.Event()
    for _ in range(200):  # the gate takes them (a thread each)
        if threading.active_count() >= before + 20:
            break
        waited.wait(0.05)
    assert threading.active_count() >= before + 20
    for client in clients:
        client.close()
    for _ in range(200):  # within the checks' 1 s, at any load: 10 s
        if threading.active_count() <= before:
            break
        waited.wait(0.05)
    assert threading.active_count() <= before, threading.enumerate()


def test_another_runs_keys_are_not_reached_by_an_encoded_path(gate, etcd, run_id):
    # etcd percent-decodes the path and cleans it (path.Join) after the gate's check: /store/<own>/%2e%2e/...
    # and /store/<own>/x%2F..%2F... read, rewrote and deleted any other run's state and store on 3.4 and 3.5.
    # The state is a pickle torch's agents load (dynamic_rendezvous.py _BackendRendezvousStateHolder): a
    # rewrite of it is code run in the other job's pods.
    endpoint = gate()
    other = f"victim-{uuid.uuid4().hex[:8]}"
    state = f"/v2/keys/torch/elastic/rendezvous/{other}"
    assert ask(etcd.endpoint, "PUT", state, source=OTHER, value="theirs", ttl=600)[0] == 201
    theirs = f"/v2/keys/torch/elastic/store/{other}/k"
    assert ask(etcd.endpoint, "PUT", theirs, source=OTHER, value="a", ttl=600)[0] == 201
    store = f"/v2/keys/torch/elastic/store/{run_id}"
    assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 201
    for path in (
        f"{store}/%2e%2e/%2e%2e/rendezvous/{other}",
        f"{store}/%2E%2E/%2E%2E/rendezvous/{other}",
        f"{store}/x%2F..%2F..%2F..%2Frendezvous%2F{other}",
        f"{store}/%2e/../../rendezvous/{other}",
        f"{store}/./k",
    ):
        assert ask(endpoint, "GET", path)[0] == 403, path
        assert ask(endpoint, "PUT", path, value="mine", ttl=60)[0] == 403, path
        assert ask(endpoint, "DELETE", path)[0] == 403, path
    assert ask(endpoint, "DELETE", f"{store}/%2e%2e/{other}?recursive=true&dir=true")[0] == 403
    status, answer = ask(etcd.endpoint, "GET", state)
    assert status == 200 and answer["node"]["value"] == "theirs"
    assert ask(etcd.endpoint, "GET", theirs)[0] == 200


def test_a_ttl_hidden_from_etcd_in_the_form_is_refused_or_kept(gate, etcd, run_id):
    # The gate read a body as a form whatever its Content-Type, and the query before the body; etcd reads a
    # body only as application/x-www-form-urlencoded, and its fields first (Go's Request.ParseForm). A ttl
    # only in a text/plain body, or a form body's empty ttl= under a checked one, stored a key for good.
    endpoint = gate(Limits(max_ttl_s=60))
    state = f"/v2/keys/torch/elastic/rendezvous/{run_id}"
    store = f"/v2/keys/torch/elastic/store/{run_id}"
    assert ask(endpoint, "PUT", store, dir="true", prevExist="false")[0] == 201
    host, port = endpoint.split(":")
    for path, body, kind in (
        (f"{state}?value=kept", b"ttl=60", "text/plain"),
        (f"{store}/k?value=kept&ttl=60", b"ttl=", "application/x-www-form-urlencoded"),
        (f"{store}/j?value=kept&ttl=60", b"ttl=&value=other", "application/x-www-form-urlencoded"),
    ):
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        connection.request("PUT", path, body=body, headers={"Content-Type": kind})
        status = connection.getresponse().status
        connection.close()
        key = path.split("?")[0]
        held, answer = ask(etcd.endpoint, "GET", key)
        assert status >= 400 or (held == 200 and 0 < answer["node"].get("ttl", 0) <= 60), (path, status, answer)


def test_an_unknown_address_is_refused_everything(gate, run_id):
    endpoint = gate()
    assert ask(endpoint, "GET", f"/v2/keys/torch/elastic/rendezvous/{run_id}", source=OTHER)[0] == 403
    status, answer = ask(endpoint, "GET", "/v2/machines")
    assert status == 200 and answer["text"] == f"http://{endpoint}"  # python-etcd's reconnect list: the gate only


def test_python_etcd_sees_a_refusal_as_an_etcd_error(gate, run_id):
    host, port = gate().split(":")
    client = python_etcd.Client(host=host, port=int(port), allow_reconnect=True)
    with pytest.raises(python_etcd.EtcdException):
        client.delete("/torch", recursive=True)


def test_the_command_line_refuses_bad_arguments(capsys):
    argv = ["--etcd", "nohost", "--listen", "x", "--static", "a", "--max-store-keys", "0", "--sweep-interval-s", "0",
            "--max-store-bytes", "0", "--max-held-bytes", "0", "--max-run-write-burst-bytes", "100"]  # fmt: skip
    assert gate_main(argv) == 2
    err = capsys.readouterr().err
    for wanted in (
        "--etcd must be HOST:PORT, got 'nohost'",
        "--listen must be HOST:PORT, got 'x'",
        "--static must be ADDRESS=RUN_ID, got 'a'",
        "--max-store-keys must be a whole number >= 1, got 0",
        "--sweep-interval-s must be a whole number >= 1, got 0",
        "--max-store-bytes must be a whole number >= 1, got 0",
        "--max-held-bytes must be a whole number >= 1, got 0",
        "--max-run-write-burst-bytes must be at least max-value-bytes + 1024, and 8192 (17408), got 100",
    ):
        assert wanted in err


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="max_value_bytes must be a whole number >= 1"):
        Limits(max_value_bytes=0)
    with pytest.raises(ValueError, match="max_store_value_bytes must be a whole number >= 1, got 0; max_store_bytes"):
        Limits(max_store_value_bytes=0, max_store_bytes=-1)  # every problem at once
    with pytest.raises(ValueError, match=r"max_gate_write_burst_bytes must be at least .* \(8192\), got 8000"):
        Limits(max_value_bytes=1000, max_gate_write_burst_bytes=8000)  # no write could ever pass (8 KiB each)


@pytest.mark.slow
def test_a_real_two_node_job_trains_to_the_end_through_the_gate(gate, run_id, tmp_path, capfd):
    # The launcher's whole use of etcd (torchrun's agents: the rendezvous, the store's master address,
    # role infos and exit barrier) goes through the gate, whose rules it must never break.
    job = LocalJob(
        etcd_endpoint=gate(), run_id=run_id, workdir=tmp_path / "job",
        script_args=["--total-steps=3", "--global-batch-size=4"], nnodes="2:2",
    )  # fmt: skip
    try:
        nodes = [job.start_node(), job.start_node()]
        for node in nodes:
            assert node.wait(300) == 0, node.log_text()[-3000:]  # a hang detector only
    finally:
        job.stop()
    assert "etcd-gate: refused" not in capfd.readouterr().err  # the gate prints each refusal
