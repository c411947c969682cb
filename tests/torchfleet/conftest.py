"""The fake cluster API and kubeconfig (fake_cluster.py), fixtures of every command test here."""

from tests.torchfleet.fake_cluster import api, kubeconfig  # noqa: F401 (fixtures)
