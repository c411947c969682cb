"""Whether each GPU pool's zone offers its machine: a command per pool for `torchfleet check`.

Issue 23 asked whether a GPU offered in the region but not in a pool's zone should be refused. Since
GCP review F7 it is, offline, where a trusted per-zone list exists: GCP's A100s (catalog/gpu_zones.yaml,
components/cloud_limits.py zone_offers). Elsewhere it is not, because no table shipped here can be
right for every account:
- AWS maps zone names (us-west-2a) to physical zones independently for each account, so one account's
  us-west-2a may offer g5 and another's not (AZ IDs:
  https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html);
- Azure maps the logical zones "1".."3" to physical zones per subscription, and restricts sizes per
  subscription (https://learn.microsoft.com/azure/reliability/availability-zones-overview, "Physical
  and logical availability zones"; `az vm list-skus` lists the restrictions);
- GCP's zone names are global, but the machine-readable per-zone list
  (github.com/Cyclenerd/google-cloud-pricing-cost-calculator tools/acceleratortypezone.csv) was last
  changed on 2023-05-02 and has no H100: for T4, V100, L4 and H100 it could refuse pools that deploy
  (catalog/gpu_zones.yaml `unchecked` says why for each).
The region-level check stays (components/cloud_limits.py region_offers). What is left is the account's
own answer, which each cloud's CLI gives in one command: `torchfleet check` prints it for every pool
(components/clouds/preflight.py), before `pulumi up`.
"""

from __future__ import annotations

from components.spec import GpuPoolSpec, PlatformSpec


def _command(spec: PlatformSpec, pool: GpuPoolSpec) -> str:
    types = ",".join(m.type for m in pool.machines)
    if spec.cloud == "aws":
        return (
            f"aws ec2 describe-instance-type-offerings --region {spec.region} --location-type availability-zone "
            f"--filters Name=location,Values={pool.zone} Name=instance-type,Values={types}"
        )
    if spec.cloud == "gcp":
        return f'gcloud compute accelerator-types list --filter="zone:{pool.zone} AND name:{pool.accelerator}"'
    return f"az vm list-skus --location {spec.region} --zone --all --size {types} --output table"


def zone_checks(spec: PlatformSpec) -> list[str]:
    """One line per GPU pool: the zone, the machine, and the command that says whether this account has it there."""
    if spec.cloud not in ("aws", "gcp", "azure"):
        return []
    return [
        f"{pool.gpu} in zone {pool.zone} ({', '.join(m.type for m in pool.machines)}): {_command(spec, pool)}"
        for pool in spec.gpu_pools
    ]
