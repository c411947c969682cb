"""What a replica group advertises (inplace_addresses.py): the pod IP on Kubernetes, where no pod name
resolves. Regression: every group advertised its hostname, which resolves for no other pod of an
Indexed Job, so on a cluster no group could heal from a peer or join the quorum's process group."""

from __future__ import annotations

from datetime import timedelta

import pytest
from elastic_trainer.inplace.addresses import advertised_host, manager_addresses, url_host


@pytest.mark.parametrize(("value", "expected"), [("", None), ("10.4.0.17", "10.4.0.17"), ("fd00::2", "fd00::2"),
                                                 (" 10.4.0.17 ", "10.4.0.17")])
def test_the_pod_ip_is_advertised_when_set(value, expected):
    assert advertised_host({"POD_IP": value}) == expected
    assert advertised_host({}) is None


def test_a_pod_ip_that_is_no_address_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=r"POD_IP='pod-0': must be the pod's IP address"):
        advertised_host({"POD_IP": "pod-0"})


def test_an_ipv6_host_is_bracketed_in_urls_only():
    assert (url_host("fd00::2"), url_host("10.4.0.17")) == ("[fd00::2]", "10.4.0.17")


def test_off_kubernetes_the_group_keeps_its_hostname_and_loopback_store():
    found = manager_addresses(timedelta(seconds=5), {})
    assert found["store_addr"] == "127.0.0.1" and "checkpoint_transport" not in found


def test_on_kubernetes_every_address_is_the_pod_ip_and_a_peer_heals_from_it():
    import torch
    from torchft.checkpointing import HTTPTransport

    # 127.0.0.2 stands for a pod IP: an address of this machine other than its hostname's
    timeout = timedelta(seconds=10)
    found = manager_addresses(timeout, {"POD_IP": "127.0.0.2"})
    source, healer = found["checkpoint_transport"], HTTPTransport(timeout=timeout, num_chunks=0)
    try:
        assert (found["hostname"], found["store_addr"]) == ("127.0.0.2", "127.0.0.2")
        address = source.metadata()  # what the Lighthouse hands a healing group
        assert address.startswith("http://127.0.0.2:")
        # the real heal: the live state served by one group, fetched by another from that address
        state = {"model": {"w": torch.arange(4.0)}, "step": 7}
        source.send_checkpoint(dst_ranks=[1], step=7, state_dict=state, timeout=timeout)
        got = healer.recv_checkpoint(src_rank=0, metadata=address, step=7, timeout=timeout)
        assert got["step"] == 7 and torch.equal(got["model"]["w"], state["model"]["w"])
    finally:
        source.shutdown(wait=True)
        healer.shutdown(wait=True)
