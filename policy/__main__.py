"""The CrossGuard policy pack: `pulumi preview --policy-pack policy [--policy-pack-config FILE]`.

The per-stack limits (maxGpus, allowOnDemandGpus, and restrictPublicEndpoint as public-endpoint's
enforcementLevel) come as policy config, written from the stack's torchfleet:guardrails by
`torchfleet check --stack-file ... --policy-config-out FILE`.
"""

from guardrails import build_policies
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(
    name="torchfleet-guardrails",
    policies=build_policies(),
    # Mandatory: a violation fails `pulumi preview`/`up`, as it fails `torchfleet check` (each
    # policy may set its own level: public-endpoint is advisory unless its config says otherwise).
    enforcement_level=EnforcementLevel.MANDATORY,
)
