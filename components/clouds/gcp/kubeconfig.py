"""The GKE kubeconfig: no static credentials, only gke-gcloud-auth-plugin exec auth.

Since GKE 1.26 kubectl authenticates through the plugin (gcloud components install
gke-gcloud-auth-plugin): https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl
The plugin uses gcloud's active account unless told to use Application Default Credentials
(kubernetes/cloud-provider-gcp cmd/gke-gcloud-auth-plugin/cred/cred.go: accessToken() reads ADC
only with --use_application_default_credentials). The GCP provider, and the README's setup, use
ADC: without the flag the Kubernetes resources were applied as another identity, or failed where
only ADC exists (CI, workload identity federation; issue 20, GCP review F2).
The file holds no secret itself, but it names the endpoint and CA, so it is still exported as
a Pulumi secret like every cloud's kubeconfig.
"""

from __future__ import annotations

import yaml

AUTH_PLUGIN = "gke-gcloud-auth-plugin"
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
ADC_FLAG = "--use_application_default_credentials"


def kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str, dns_endpoint: bool = False) -> str:
    """A kubeconfig for one cluster; ca_certificate is base64 PEM as GKE's masterAuth gives it.

    With dns_endpoint, `endpoint` is GKE's DNS control-plane endpoint (gcp/cluster.py api_server). It
    serves a publicly trusted certificate, not one of the cluster's CA, so the CA is left out and the
    system's trust store verifies it, as `gcloud container clusters get-credentials --dns-endpoint`
    writes it (google-cloud-sdk googlecloudsdk/api_lib/container/kubeconfig.py Cluster(): no
    certificate-authority-data when has_dns_endpoint). The cluster's CA would fail that handshake.
    The ADC flag stays with the DNS endpoint: gcloud refused that pair until 544.0.0
    (DNSEndpointOrUseApplicationDefaultCredentialsError in _ExecAuthPlugin) and 545.0.0 removed the
    refusal (google-cloud-sdk-unofficial/google-cloud-sdk f882c141f4, 2025-11-17,
    lib/googlecloudsdk/api_lib/container/kubeconfig.py): `get-credentials --dns-endpoint` with
    container/use_application_default_credentials set now writes exactly this (server, no CA, the
    flag). The plugin's ADC path mints an ordinary OAuth access token, scopes cloud-platform and
    userinfo.email (kubernetes/cloud-provider-gcp cmd/gke-gcloud-auth-plugin/cred/
    default_credentials_token_provider.go at 1f26b22d), which the DNS endpoint's IAM check reads.
    """
    context = f"gke-{cluster_name}"
    server: dict = {"server": f"https://{endpoint}"}
    if not dns_endpoint:
        server["certificate-authority-data"] = ca_certificate
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context,
                    "cluster": server,
                }
            ],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "users": [
                {
                    "name": context,
                    "user": {
                        "exec": {
                            "apiVersion": EXEC_API_VERSION,
                            "command": AUTH_PLUGIN,
                            "args": [ADC_FLAG],
                            "provideClusterInfo": True,
                            "interactiveMode": "IfAvailable",
                            "installHint": f"Install {AUTH_PLUGIN}: gcloud components install {AUTH_PLUGIN}",
                        }
                    },
                }
            ],
        },
        sort_keys=False,
    )
