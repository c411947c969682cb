"""The control plane's audit logs: a diagnostic setting on the cluster into a Log Analytics workspace.

AKS keeps no control-plane logs of its own: "Resource logs aren't collected and stored until you create a
diagnostic setting" (aks-docs monitor-aks.md). The categories sent:

- kube-audit-admin: the Kubernetes audit log of create, update, delete, patch and post, without get and
  list ("If you need get and list events, enable kube-audit instead. Be aware that those events can be
  prolific and add to the cost": Microsoft's AKS security guidance, azure-docs architecture, AKS
  diagnostic settings);
- guard: the Entra ID and Azure RBAC authorization decisions (who was refused what).

Cost: Log Analytics bills ingestion per GB (Analytics logs) and keeps the first 31 days at no charge
(https://azure.microsoft.com/pricing/details/monitor/), so RETENTION_DAYS stays inside that; an idle
cluster's audit volume is small (its controllers' writes), a busy one's grows with job submissions.
The workspace is deleted with the stack (`pulumi destroy`): export what must outlive it.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import monitor, operationalinsights

from components.clouds.azure import naming
from components.spec import PlatformSpec

AUDIT_CATEGORIES = ("kube-audit-admin", "guard")
RETENTION_DAYS = 30
SETTING_NAME = "torchfleet-audit"


def create_audit_logs(
    name: str,
    spec: PlatformSpec,
    resource_group_name: pulumi.Input[str],
    cluster_id: pulumi.Input[str],
    parent: pulumi.Resource,
) -> tuple[operationalinsights.Workspace, monitor.DiagnosticSetting]:
    workspace = operationalinsights.Workspace(
        f"{name}-logs",
        resource_group_name=resource_group_name,
        location=spec.region,
        sku={"name": "PerGB2018"},
        retention_in_days=RETENTION_DAYS,
        tags=naming.tags(spec.stack),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    setting = monitor.DiagnosticSetting(
        f"{name}-audit",
        name=SETTING_NAME,
        resource_uri=cluster_id,
        workspace_id=workspace.id,
        # Resource-specific tables (AKSAudit, AKSAuditAdmin, ...) rather than the one AzureDiagnostics table.
        log_analytics_destination_type="Dedicated",
        logs=[{"category": c, "enabled": True} for c in AUDIT_CATEGORIES],
        # The setting's name is fixed per cluster: a replacement must delete the old one first.
        opts=pulumi.ResourceOptions(parent=parent, delete_before_replace=True),
    )
    return workspace, setting
