"""The cloud-agnostic Kubernetes layer: manifests as data (manifests.py), applied by training.py."""
