"""The cluster, through the official kubernetes client: connect, create, list, read, logs, delete.

Every API failure becomes a JobError with the exit code the command returns: a job that does
not exist or a taken name is the user's to fix (2); an unreachable or refusing cluster is 1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from torchfleet.jobs.errors import ClusterError, JobNotFoundError, NameTakenError, UsageError
from torchfleet.jobs.manifests import RESOURCES

# Connect in seconds, read in seconds: a dead endpoint should fail fast, not hang a terminal.
TIMEOUT = (10, 60)
FOLLOW_TIMEOUT = (10, 7 * 24 * 3600)
FIELD_MANAGER = "torchfleet"
T = TypeVar("T")


def connect(
    kubeconfig: Path | None = None, context: str | None = None, kubeconfig_data: Any = None
) -> client.ApiClient:
    """An ApiClient for --kubeconfig/--context, or the stack's kubeconfig output (``kubeconfig_data``)."""
    try:
        if kubeconfig_data is not None:
            data = yaml.safe_load(kubeconfig_data) if isinstance(kubeconfig_data, str) else kubeconfig_data
            if not isinstance(data, dict):
                raise ClusterError("--stack: the stack's kubeconfig output is not a kubeconfig document")
            return config.new_client_from_config_dict(data, context=context, persist_config=False)
        if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
            raise UsageError(f"--kubeconfig: {kubeconfig} does not exist")
        return config.new_client_from_config(
            config_file=str(Path(kubeconfig).expanduser()) if kubeconfig else None,
            context=context,
            persist_config=False,
        )
    except config.ConfigException as error:
        message = str(error)
        if context and "context" in message.lower():
            raise UsageError(f"--context: {message}") from None
        raise UsageError(
            f"no cluster to talk to ({message}); pass --stack NAME, or --kubeconfig PATH [--context NAME]"
        ) from None


def _host(api: client.ApiClient) -> str:
    return getattr(api.configuration, "host", "?")


class JobClient:
    """The calls the job commands make; each failure translated (see the module docstring)."""

    def __init__(self, api: client.ApiClient, namespace: str, operator: str):
        self.api = api
        self.namespace = namespace
        self.resource = RESOURCES[operator]
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.networking = client.NetworkingV1Api(api)

    # ------------------------------------------------------------ error translation

    def _call(
        self, fn: Callable[..., T], *args: Any, job: str | None = None, creating: bool = False, **kwargs: Any
    ) -> T:
        try:
            return fn(*args, _request_timeout=TIMEOUT, **kwargs)
        except ApiException as error:
            raise self._translate(error, job, creating) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ClusterError(f"no cluster reachable at {_host(self.api)}: {error}") from None

    def _translate(self, error: ApiException, job: str | None, creating: bool = False) -> Exception:
        kind = self.resource["kind"]
        # A 404 on a create means the resource type itself is missing, not the job.
        if error.status == 404 and job is not None and not creating:
            return JobNotFoundError(
                f"NAME: no {kind} {job!r} in namespace {self.namespace}; `torchfleet list` shows the jobs there"
            )
        if error.status == 404:
            return ClusterError(
                f"the cluster at {_host(self.api)} has no {kind} resource ({self.resource['group']}): "
                "is the training layer deployed, and is this the stack's operator (--operator, or --stack)?"
            )
        if error.status == 409:
            return NameTakenError(
                f"NAME: a job named {job!r} already exists in namespace {self.namespace}; choose another name "
                f"or `torchfleet delete {job}` first"
            )
        if error.status in (401, 403):
            return ClusterError(f"the cluster refused the request ({error.status} {error.reason}): {_message(error)}")
        if error.status in (400, 422):
            return ClusterError(f"the cluster rejected the {kind}: {_message(error)}")
        return ClusterError(f"cluster error {error.status} {error.reason}: {_message(error)}")

    # ------------------------------------------------------------ jobs

    def _args(self) -> tuple[str, str, str, str]:
        r = self.resource
        return r["group"], r["version"], self.namespace, r["plural"]

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        name = job["metadata"]["name"]
        # Strict: the server refuses fields it would otherwise prune, instead of dropping them.
        return self._call(
            self.custom.create_namespaced_custom_object, *self._args(), body=job,
            field_manager=FIELD_MANAGER, field_validation="Strict", job=name, creating=True,
        )

    def exists(self, name: str) -> bool:
        try:
            self.get(name)
        except JobNotFoundError:
            return False
        return True

    def get(self, name: str) -> dict[str, Any]:
        return self._call(self.custom.get_namespaced_custom_object, *self._args(), name, job=name)

    def list(self) -> list[dict[str, Any]]:
        found = self._call(self.custom.list_namespaced_custom_object, *self._args())
        return list(found.get("items") or [])

    def delete(self, name: str) -> None:
        # Background: the controller's pods and the job's network policy carry owner references
        # and are garbage-collected after the job is gone.
        self._call(
            self.custom.delete_namespaced_custom_object, *self._args(), name,
            propagation_policy="Background", job=name,
        )

    def create_network_policy(self, policy: dict[str, Any], owner: dict[str, Any]) -> None:
        meta = owner["metadata"]
        policy = {
            **policy,
            "metadata": {
                **policy["metadata"],
                # Deleting the job deletes its policy.
                "ownerReferences": [{
                    "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
                    "uid": meta["uid"], "blockOwnerDeletion": False,
                }],
            },
        }
        self._call(
            self.networking.create_namespaced_network_policy, self.namespace, policy,
            field_manager=FIELD_MANAGER,
        )

    # ------------------------------------------------------------ pods, nodes, events, logs

    def pods(self, selector: str) -> list[client.V1Pod]:
        found = self._call(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
        return list(found.items or [])

    def events(self, names: list[str]) -> list[client.CoreV1Event]:
        events: list[client.CoreV1Event] = []
        for name in names:
            found = self._call(
                self.core.list_namespaced_event, self.namespace, field_selector=f"involvedObject.name={name}"
            )
            events += list(found.items or [])
        return events

    @functools.cache  # noqa: B019 (one client per command run; nodes do not change within it)
    def node_labels(self, name: str) -> dict[str, str] | None:
        """A node's labels, or None if the user may not read nodes (researchers often cannot)."""
        try:
            return dict(self._call(self.core.read_node, name).metadata.labels or {})
        except ClusterError:
            return None

    def log_lines(self, pod: str, container: str, *, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        if not follow:
            text = self._call(
                self.core.read_namespaced_pod_log, pod, self.namespace, container=container, tail_lines=tail,
            )
            yield from (text or "").splitlines()
            return
        # Following: stream the response instead of waiting for the pod to end. A training log can
        # stay quiet for a long time (a slow epoch, a long checkpoint), so the read timeout is
        # a week, not a minute; the client refuses "no read timeout" (it wants two numbers).
        try:
            response = self.core.read_namespaced_pod_log(
                pod, self.namespace, container=container, follow=True, tail_lines=tail,
                _preload_content=False, _request_timeout=FOLLOW_TIMEOUT,
            )
        except ApiException as error:
            raise self._translate(error, pod) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ClusterError(f"no cluster reachable at {_host(self.api)}: {error}") from None
        buffer = b""
        for chunk in response.stream():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line.decode(errors="replace")
        if buffer:
            yield buffer.decode(errors="replace")


def _message(error: ApiException) -> str:
    try:
        import json

        return json.loads(error.body).get("message") or str(error.reason)
    except (TypeError, ValueError, AttributeError):
        return str(error.body or error.reason)
