"""GCP: GKE with spot GPU pools and Filestore (see cluster.py for the layout)."""

from components.clouds.gcp.cluster import GcpCluster

__all__ = ["GcpCluster"]
