"""The fake cluster API and kubeconfig of test_jobs_cluster.py, shared with the other command tests."""

from tests.torchfleet.test_jobs_cluster import api, kubeconfig  # noqa: F401 (fixtures)
