"""The CrossGuard pack (policy/) run through pulumi-policy's own analyzer, without the Pulumi CLI.

`pulumi preview --policy-pack policy` starts the pack as a gRPC analyzer and calls Configure and
AnalyzeStack on it. These tests call the same servicer methods with the requests the engine would
send (pulumi-policy's _PolicyAnalyzerServicer is private API, pinned with pulumi-policy==1.21.0),
so the pack's conversion of PolicyResources, its config and its verdicts are the real ones.
"""

from __future__ import annotations

import sys

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE

from components import policy
from tests.harness import REPO, synth_stack
from torchfleet.check import resources_of

sys.path.insert(0, str(REPO / "policy"))
import guardrails

MANDATORY = proto.EnforcementLevel.Value("MANDATORY")
ADVISORY = proto.EnforcementLevel.Value("ADVISORY")
LEVELS = {"mandatory": MANDATORY, "advisory": ADVISORY}


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::torchfleet::{type_}::{name}"


def request_of(resources: list[dict]) -> proto.AnalyzeStackRequest:
    """The AnalyzeStackRequest the engine would send for these resources."""
    out = []
    for r in resources:
        props = struct_pb2.Struct()
        props.update(r["inputs"])
        deps = {k: proto.AnalyzerPropertyDependencies(urns=v)
                for k, v in (r["options"].get("propertyDependencies") or {}).items()}
        out.append(proto.AnalyzerResource(
            type=r["type"], name=r["name"], urn=r.get("urn") or urn(r["type"], r["name"]), properties=props,
            options=proto.AnalyzerResourceOptions(protect=bool(r["options"].get("protect"))),
            propertyDependencies=deps,
        ))
    return proto.AnalyzeStackRequest(resources=out)


def analyze(resources: list[dict], config: dict | None = None) -> list[proto.AnalyzeDiagnostic]:
    servicer = _PolicyAnalyzerServicer("torchfleet-guardrails", "0.1.0", guardrails.build_policies(),
                                       EnforcementLevel.MANDATORY)
    if config is not None:
        # As the engine reads a --policy-pack-config file: a policy's "enforcementLevel" is taken out
        # of its properties; without one, the policy keeps the level it declares.
        declared = {p.name: p.enforcement_level.value for p in guardrails.build_policies()}
        policy_config = {}
        for name, props in config.items():
            props = dict(props)
            level = props.pop("enforcementLevel", declared[name])
            s = struct_pb2.Struct()
            s.update(props)
            policy_config[name] = proto.PolicyConfig(enforcementLevel=LEVELS[level], properties=s)
        servicer.Configure(proto.ConfigureAnalyzerRequest(policyConfig=policy_config), None)
    return list(servicer.AnalyzeStack(request_of(resources), None).diagnostics)


def bad_stack() -> list[dict]:
    pool = {"type": "aws:eks/nodeGroup:NodeGroup", "name": "gpu-t4-a", "options": {"protect": False},
            "inputs": {"taints": [], "subnetIds": ["s-a", "s-b"], "capacityType": "ON_DEMAND",
                       "instanceTypes": ["g4dn.12xlarge"], "scalingConfig": {"maxSize": 4.0},
                       "labels": {"torchfleet.io/pool": "gpu"}}}
    efs = {"type": "aws:efs/fileSystem:FileSystem", "name": "efs", "inputs": {"encrypted": False},
           "options": {"protect": False}}
    release = {"type": "kubernetes:helm.sh/v3:Release", "name": "cas", "options": {},
               "inputs": {"chart": "cluster-autoscaler", "version": "latest"}}
    return [pool, efs, release]


def verdicts(diagnostics) -> set[tuple[str, str]]:
    return {(d.policyName, d.urn) for d in diagnostics}


def test_pack_has_one_policy_per_rule_mandatory_but_the_endpoint_advisories():
    policies = guardrails.build_policies()
    assert [p.name for p in policies] == [r.name for r in policy.RULES]
    levels = {p.name: p.enforcement_level for p in policies}
    assert levels.pop("public-endpoint") == EnforcementLevel.ADVISORY
    # GKE's DNS endpoint open to every network is IAM-gated by design: reported, never failing.
    assert levels.pop("dns-endpoint-external") == EnforcementLevel.ADVISORY
    assert set(levels.values()) == {EnforcementLevel.MANDATORY}


def test_pack_reports_what_the_offline_check_reports_on_the_same_resources():
    resources = bad_stack()
    offline = {(v.rule, urn(r["type"], v.resource)) for v in policy.check(resources, max_gpus=8)
               for r in resources if r["name"] == v.resource}
    offline |= {(v.rule, "") for v in policy.check(resources, max_gpus=8) if v.resource == policy.STACK}
    diagnostics = analyze(resources, {"gpu-count-cap": {"maxGpus": 8}})
    # store-protected reads retainOnDelete, which CrossGuard does not pass: offline only (issue 20).
    assert verdicts(diagnostics) == {v for v in offline if v[0] != "store-protected"}
    assert {d.policyName for d in diagnostics} == {
        "gpu-pool-tainted", "gpu-pool-one-zone", "gpu-pool-spot", "gpu-count-cap",
        "store-encrypted", "pinned-versions"}
    assert all(d.enforcementLevel == MANDATORY for d in diagnostics)


def test_pack_limits_come_from_policy_config_with_documented_defaults():
    pool = bad_stack()[0]  # 4 nodes x 4 GPUs, on-demand
    by_default = {d.policyName for d in analyze([pool])}
    assert {"gpu-pool-spot"} <= by_default and "gpu-count-cap" not in by_default  # 16 <= 64
    configured = {d.policyName for d in analyze([pool], {"gpu-count-cap": {"maxGpus": 15},
                                                         "gpu-pool-spot": {"allowOnDemandGpus": True}})}
    assert "gpu-count-cap" in configured and "gpu-pool-spot" not in configured


def test_pack_cannot_see_retain_on_delete_and_stays_silent_on_the_store():
    """The store is kept by retainOnDelete, not protect (issue 20); CrossGuard's resource options
    carry protect only, so the pack cannot judge it either way and reports nothing."""
    efs = {"type": "aws:efs/fileSystem:FileSystem", "name": "efs", "inputs": {"encrypted": True},
           "options": {"protect": False}}
    assert analyze([efs]) == []


def test_values_unknown_during_preview_are_not_judged_and_do_not_stop_the_pack():
    pool = bad_stack()[0]
    pool["inputs"].update(taints=UNKNOWN_STRING_VALUE, capacityType=UNKNOWN_STRING_VALUE,
                          subnetIds=[UNKNOWN_STRING_VALUE])
    pool["inputs"]["scalingConfig"]["maxSize"] = UNKNOWN_NUMBER_VALUE
    diagnostics = analyze([pool])
    # No "can't run policy during preview" advisory either: the pack never trips the proxies.
    assert diagnostics == []


def test_public_subnet_of_a_node_group_is_found_through_property_dependencies():
    subnet = {"type": "aws:ec2/subnet:Subnet", "name": "public-a", "options": {},
              "inputs": {"mapPublicIpOnLaunch": True}}
    pool = {"type": "aws:eks/nodeGroup:NodeGroup", "name": "manager", "inputs": {"subnetIds": ["x"]},
            "options": {"propertyDependencies": {"subnetIds": [urn(subnet["type"], "public-a")]}}}
    assert verdicts(analyze([subnet, pool])) == {("no-public-node-ips", urn(subnet["type"], "public-a"))}


@pytest.mark.parametrize("stack", ["aws-usw2", "gcp-usc1", "azure-eus"])
def test_example_stacks_pass_the_pack_with_their_own_limits(stack):
    result = synth_stack(stack)
    from torchfleet.preview.runner import stack_spec

    spec = stack_spec(REPO / "stacks" / f"Pulumi.{stack}.yaml")
    limits = policy.Limits(spec.guardrails.max_gpus, spec.guardrails.allow_on_demand_gpus)
    resources = resources_of(result.resources)
    # The example stacks keep the API endpoint off 0.0.0.0/0: nothing mandatory to report. GKE's DNS
    # endpoint (gcp-usc1's way in from a laptop, issue 29) is reported as the one advisory.
    found = analyze(resources, policy.pack_config(limits))
    advisories = [("dns-endpoint-external", ADVISORY)] if stack == "gcp-usc1" else []
    assert [(d.policyName, d.enforcementLevel) for d in found] == advisories
    tight = analyze(resources, policy.pack_config(policy.Limits(1, limits.allow_on_demand_gpus)))
    assert [d.policyName for d in tight if d.enforcementLevel == MANDATORY] == ["gpu-count-cap"]
    restricted = analyze(resources, policy.pack_config(policy.Limits(
        limits.max_gpus, limits.allow_on_demand_gpus, restrict_public_endpoint=True)))
    # no endpoint open to 0.0.0.0/0 passes the restriction (the DNS advisory stays advisory)
    assert [(d.policyName, d.enforcementLevel) for d in restricted] == advisories


@pytest.fixture
def served_pack():
    """policy/__main__.py started as the Pulumi CLI starts it: it prints its port and serves gRPC."""
    import subprocess

    import grpc
    from pulumi.runtime.proto import analyzer_pb2_grpc

    proc = subprocess.Popen([sys.executable, "__main__.py"], cwd=REPO / "policy", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().strip() or 0)
        assert port, proc.stderr.read() if proc.poll() is not None else "no port printed"
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_pack_program_serves_the_policies_over_grpc(served_pack):
    from google.protobuf import empty_pb2

    info = served_pack.GetAnalyzerInfo(empty_pb2.Empty(), timeout=60)
    assert info.name == "torchfleet-guardrails"
    assert [p.name for p in info.policies] == [r.name for r in policy.RULES]
    assert {p.name: p.enforcementLevel for p in info.policies if p.enforcementLevel != MANDATORY} == {
        "public-endpoint": ADVISORY, "dns-endpoint-external": ADVISORY}
    schema = {p.name: p.configSchema for p in info.policies}
    assert "maxGpus" in schema["gpu-count-cap"].properties
    assert "allowOnDemandGpus" in schema["gpu-pool-spot"].properties

    s = struct_pb2.Struct()
    s.update({"maxGpus": 8})
    served_pack.Configure(proto.ConfigureAnalyzerRequest(
        policyConfig={"gpu-count-cap": proto.PolicyConfig(enforcementLevel=MANDATORY, properties=s)}), timeout=60)
    diagnostics = served_pack.AnalyzeStack(request_of(bad_stack()), timeout=60).diagnostics
    assert {d.policyName for d in diagnostics} >= {"gpu-pool-tainted", "gpu-count-cap", "store-encrypted"}
