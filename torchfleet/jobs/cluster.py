"""The cluster, through the official kubernetes client: create, list, read, logs, delete (connecting to it:
kubeconfig.py).

Every API failure becomes a JobError with the exit code the command returns: a job that does
not exist or a taken name is the user's to fix (2); an unreachable or refusing cluster is 1.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from torchfleet.jobs import manifests, store_folder
from torchfleet.jobs.errors import ClusterError, JobNotFoundError, NameTakenError, NotYoursError, UsageError
from torchfleet.jobs.indexed_job import BATCH_JOB, LABEL_RECOVERY, RECOVERY_MODES
from torchfleet.jobs.kubeconfig import api_host
from torchfleet.jobs.manifests import RESOURCES
from torchfleet.jobs.store_folder import pod_templates  # here too: callers and tests import it from cluster

# Connect in seconds, read in seconds: a dead endpoint should fail fast, not hang a terminal.
TIMEOUT = (10, 60)
FOLLOW_TIMEOUT = (10, 7 * 24 * 3600)
FIELD_MANAGER = "torchfleet"
# Who made an object, as the API server authenticated them: every object the CLI creates carries it (and so do
# its pod templates), and only that user or an administrator may change or delete it
# (k8s/base/cluster/validatingadmissionpolicy-owner.yaml). An annotation: a username ('a@b.org', 'x:y') is
# not a valid label value.
CREATED_BY = "torchfleet.io/created-by"
# The policies that refuse another researcher's object or a name of another's job: their refusals are passed
# on as what they are (the maker and whom to ask), not as a generic 403.
OWNER_POLICIES = ("'torchfleet-owner'", "'torchfleet-job-names'")
T = TypeVar("T")


class JobClient:
    """The calls the job commands make; each failure translated (see the module docstring)."""

    def __init__(self, api: client.ApiClient, namespace: str, operator: str):
        self.api = api
        self.namespace = namespace
        self.resource = RESOURCES[operator]
        # The `job` operator's jobs are batch/v1 Jobs, as every --recovery inplace job: no custom resource
        # (and no CRD in the cluster) is involved.
        self.has_crd = self.resource is not BATCH_JOB
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self.batch = client.BatchV1Api(api)  # the `job` operator's and in-place jobs: Indexed Jobs
        self.apps = client.AppsV1Api(api)  # their Lighthouse
        self._creator: str | None = None

    # ------------------------------------------------------------ who makes what

    def creator(self) -> str:
        """This CLI's username as the cluster knows it (a SelfSubjectReview, asked once per command)."""
        if self._creator is None:
            from torchfleet.jobs import reader_pod

            self._creator = reader_pod.whoami(self)
        return self._creator

    def stamped(self, document: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``document`` recording its maker, on the object and on each of its pod templates (the
        pods a controller makes from them are the maker's too), its store mounts under the maker's folder."""
        document = copy.deepcopy(document)
        me = self.creator()
        for metadata in [document["metadata"], *(t.setdefault("metadata", {}) for t in pod_templates(document))]:
            metadata.setdefault("annotations", {})[CREATED_BY] = me
        # Its pods mount the store under their maker's folder, the record's (store_folder.py; the policy holds
        # the two equal); a username that names no folder is refused here, before anything is made.
        return store_folder.place(document, me)

    # ------------------------------------------------------------ error translation

    def _call(
        self, fn: Callable[..., T], *args: Any, job: str | None = None, creating: bool = False,
        resource: dict[str, str] | None = None, **kwargs: Any,
    ) -> T:
        for delay in (*QUOTA_CONFLICT_BACKOFF_S, None):
            try:
                return fn(*args, _request_timeout=TIMEOUT, **kwargs)
            except ApiException as error:
                if creating and delay is not None and _quota_conflict(error):
                    time.sleep(delay)  # nothing was created: the same create again, once the quota has settled
                    continue
                raise self._translate(error, job, creating, resource) from None
            except (urllib3.exceptions.HTTPError, OSError) as error:
                raise ClusterError(f"no cluster reachable at {api_host(self.api)}: {error}") from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _translate(self, error: ApiException, job: str | None, creating: bool = False,
                   resource: dict[str, str] | None = None) -> Exception:
        resource = resource or self.resource
        kind = resource["kind"]
        # A 404 on a create means the resource type itself is missing, not the job.
        if error.status == 404 and job is not None and not creating:
            return JobNotFoundError(
                f"NAME: no {kind} {job!r} in namespace {self.namespace}; `torchfleet list` shows the jobs there"
            )
        if error.status == 404:
            return ClusterError(
                f"the cluster at {api_host(self.api)} has no {kind} resource ({resource['group']}): "
                "is the training layer deployed, and is this the stack's operator (--operator, or --stack)?"
            )
        if error.status == 409 and kind not in (self.resource["kind"], BATCH_JOB["kind"]):
            # A name derived from the job's: first come, and the first may be another researcher (a squat) or
            # an earlier job of one's own; only its maker or an administrator may delete it (owner policy).
            return NameTakenError(
                f"NAME: a {kind} named {job!r} already exists in namespace {self.namespace}: this job's name is "
                "taken for its objects (left from an earlier job of yours, or made by another researcher); "
                "nothing of this submit was left; choose another job name, or, if it is yours, "
                f"`kubectl delete {kind.lower()} {job} -n {self.namespace}` (else an administrator may)")
        if error.status == 409:
            return NameTakenError(
                f"NAME: a job named {job!r} already exists in namespace {self.namespace}; choose another name "
                f"or `torchfleet delete {job}` first"
            )
        if error.status == 403 and any(p in _message(error) for p in OWNER_POLICIES):
            return NotYoursError(_message(error).partition("denied request: ")[2] or _message(error))
        if error.status == 403 and (quota := _quota_refusal(_message(error), kind)):
            return ClusterError(quota)
        if error.status in (401, 403):
            return ClusterError(f"the cluster refused the request ({error.status} {error.reason}): {_message(error)}")
        if error.status in (400, 422):
            return ClusterError(f"the cluster rejected the {kind}: {_message(error)}")
        return ClusterError(f"cluster error {error.status} {error.reason}: {_message(error)}")

    # ------------------------------------------------------------ jobs

    def _args(self) -> tuple[str, str, str, str]:
        r = self.resource
        return r["group"], r["version"], self.namespace, r["plural"]

    def _as_dict(self, obj: Any) -> dict[str, Any]:
        """A typed client object (V1Job) as the API's JSON shape, the same as the custom objects'."""
        return self.api.sanitize_for_serialization(obj)

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        name = job["metadata"]["name"]
        job = self.stamped(job)
        # Strict: the server refuses fields it would otherwise prune, instead of dropping them.
        if manifests.is_indexed_job(job):
            return self._as_dict(self._call(
                self.batch.create_namespaced_job, self.namespace, job, field_manager=FIELD_MANAGER,
                field_validation="Strict", job=name, creating=True, resource=BATCH_JOB,
            ))
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

    def _not_found(self, name: str) -> JobNotFoundError:
        return JobNotFoundError(f"NAME: no {self.resource['kind']} {name!r} in namespace {self.namespace}; "
                                "`torchfleet list` shows the jobs there")

    def get(self, name: str) -> dict[str, Any]:
        """The operator's job of this name, else torchfleet's Indexed Job of this name (`job` operator, in place)."""
        if self.has_crd:
            try:
                return self._call(self.custom.get_namespaced_custom_object, *self._args(), name, job=name)
            except JobNotFoundError:
                pass
        found = self._indexed_job(name)
        if found is None:
            raise self._not_found(name)
        return found

    def _indexed_job(self, name: str) -> dict[str, Any] | None:
        """A batch Job torchfleet submitted (labelled with its recovery mode), or None. Other Jobs in the
        namespace (the platform's store-owner Job, a user's own) are not torchfleet's to show or delete."""
        try:
            job = self._as_dict(self._call(self.batch.read_namespaced_job, name, self.namespace, job=name,
                                           resource=BATCH_JOB))
        except JobNotFoundError:
            return None
        labels = (job.get("metadata") or {}).get("labels") or {}
        return job if labels.get(LABEL_RECOVERY) in RECOVERY_MODES else None

    def list(self) -> list[dict[str, Any]]:
        found = self._call(self.custom.list_namespaced_custom_object, *self._args()) if self.has_crd else {}
        indexed = self._call(self.batch.list_namespaced_job, self.namespace,
                             label_selector=f"{LABEL_RECOVERY} in ({','.join(RECOVERY_MODES)})", resource=BATCH_JOB)
        return list(found.get("items") or []) + [self._as_dict(j) for j in (indexed.items or [])]

    def delete(self, name: str) -> str:
        """Delete a job of any kind; returns its kind.

        Background: the job's pods, policies and Lighthouse carry owner references and are
        garbage-collected after the job is gone. A batch Job must say so: its API's default is
        to orphan the pods (https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup).
        """
        if self.has_crd:
            try:
                self._call(self.custom.delete_namespaced_custom_object, *self._args(), name,
                           propagation_policy="Background", job=name)
                return self.resource["kind"]
            except JobNotFoundError:
                pass
        if self._indexed_job(name) is None:
            raise self._not_found(name)
        self._call(self.batch.delete_namespaced_job, name, self.namespace, propagation_policy="Background",
                   job=name, resource=BATCH_JOB)
        return BATCH_JOB["kind"]

    def remove_created(self, job: dict[str, Any]) -> None:
        """Delete a job this command just created (its kind is known: no lookup), with what it owns."""
        name = job["metadata"]["name"]
        if manifests.is_indexed_job(job):
            self._call(self.batch.delete_namespaced_job, name, self.namespace, propagation_policy="Background",
                       job=name, resource=BATCH_JOB)
        else:
            self._call(self.custom.delete_namespaced_custom_object, *self._args(), name,
                       propagation_policy="Background", job=name)

    def create_owned(self, document: dict[str, Any], owner: dict[str, Any] | None) -> None:
        """A document that belongs to the job (a network policy, the Lighthouse's Service and
        Deployment), created with an owner reference to it: deleting the job deletes it. Without an
        owner (a policy made before its job exists) it gets one later (``adopt``)."""
        document = self.stamped(document)
        if owner is not None:
            document["metadata"]["ownerReferences"] = _owner_references(owner)
        create = {
            "NetworkPolicy": self.networking.create_namespaced_network_policy,
            "Service": self.core.create_namespaced_service,
            "Deployment": self.apps.create_namespaced_deployment,
        }[document["kind"]]
        self._call(create, self.namespace, document, field_manager=FIELD_MANAGER, field_validation="Strict",
                   job=document["metadata"]["name"], creating=True, resource=_resource_of(document))

    def adopt(self, policy: dict[str, Any], owner: dict[str, Any]) -> None:
        """Make the job the owner of a network policy created before it (merge patch of its owner references)."""
        name = policy["metadata"]["name"]
        self._call(self.networking.patch_namespaced_network_policy, name, self.namespace,
                   {"metadata": {"ownerReferences": _owner_references(owner)}}, field_manager=FIELD_MANAGER,
                   _content_type="application/merge-patch+json", job=name, resource=_resource_of(policy))

    def delete_policy(self, policy: dict[str, Any]) -> None:
        """Remove a network policy this command made, if it is there (gone already: what was wanted)."""
        name = policy["metadata"]["name"]
        with contextlib.suppress(JobNotFoundError):
            self._call(self.networking.delete_namespaced_network_policy, name, self.namespace, job=name,
                       resource=_resource_of(policy))

    # ------------------------------------------------------------ the workdir's ConfigMaps (workdir.py)

    def create_config_map(self, document: dict[str, Any]) -> None:
        name = document["metadata"]["name"]
        self._call(self.core.create_namespaced_config_map, self.namespace, self.stamped(document),
                   field_manager=FIELD_MANAGER, field_validation="Strict", job=name, creating=True,
                   resource=_resource_of(document))

    def add_owner(self, document: dict[str, Any], owner: dict[str, Any]) -> None:
        """One more owner: a strategic merge patch adds to ownerReferences (merged by uid), so the
        ConfigMaps a sweep's jobs share stay until the last of them is deleted. An immutable ConfigMap
        still takes metadata changes (only data and binaryData are frozen)."""
        name = document["metadata"]["name"]
        self._call(self.core.patch_namespaced_config_map, name, self.namespace,
                   {"metadata": {"ownerReferences": _owner_references(owner)}}, field_manager=FIELD_MANAGER,
                   _content_type="application/strategic-merge-patch+json", job=name, resource=_resource_of(document))

    def delete_config_map(self, document: dict[str, Any]) -> None:
        name = document["metadata"]["name"]
        with contextlib.suppress(JobNotFoundError):  # gone already: what was wanted
            self._call(self.core.delete_namespaced_config_map, name, self.namespace, job=name,
                       resource=_resource_of(document))

    # ------------------------------------------------------------ pods, nodes, events, logs

    def create_pod(self, pod: dict[str, Any]) -> None:
        """A pod of torchfleet's own (a reader, the TensorBoard pod), refused fields and all (Strict)."""
        self._call(self.core.create_namespaced_pod, self.namespace, self.stamped(pod), field_manager=FIELD_MANAGER,
                   field_validation="Strict", job=pod["metadata"]["name"], creating=True)

    def read_pod(self, name: str) -> client.V1Pod:
        return self._call(self.core.read_namespaced_pod, name, self.namespace, job=name)

    def delete_pod(self, name: str) -> None:
        with contextlib.suppress(JobNotFoundError):  # gone already: what was wanted
            self._call(self.core.delete_namespaced_pod, name, self.namespace, job=name)

    def port_forward(self, pod: str, port: int):
        """A socket-like stream to ``port`` inside ``pod`` (the API server's portforward subresource)."""
        from kubernetes.stream import portforward

        try:
            forward = portforward(self.core.connect_get_namespaced_pod_portforward, pod, self.namespace,
                                  ports=str(port))
            return forward.socket(port)
        except ApiException as error:
            raise self._translate(error, pod) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ClusterError(f"no cluster reachable at {api_host(self.api)}: {error}") from None

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

    def log_lines(
        self, pod: str, container: str, *, follow: bool = False, tail: int | None = None, previous: bool = False,
    ) -> Iterator[str]:
        if previous:  # the container before the last restart; kubernetes' `previous=True` (kubectl logs -p)
            yield from self._previous_log_lines(pod, container, tail)
            return
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
            raise ClusterError(f"no cluster reachable at {api_host(self.api)}: {error}") from None
        buffer = b""
        for chunk in response.stream():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line.decode(errors="replace")
        if buffer:
            yield buffer.decode(errors="replace")


    def _previous_log_lines(self, pod: str, container: str, tail: int | None) -> Iterator[str]:
        try:
            text = self.core.read_namespaced_pod_log(pod, self.namespace, container=container, tail_lines=tail,
                                                     previous=True, _request_timeout=TIMEOUT)
        except ApiException as error:
            # 400 "previous terminated container ... not found": the container never restarted
            # (a pod the controller recreated starts with none).
            if error.status == 400:
                raise UsageError(f"--previous: pod {pod} has no previous container (it has not restarted in "
                                 f"place; a replaced pod starts afresh): {_message(error)}") from None
            raise self._translate(error, pod) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ClusterError(f"no cluster reachable at {api_host(self.api)}: {error}") from None
        yield from (text or "").splitlines()


def maker(obj: dict[str, Any]) -> str:
    """Who made an object, as recorded (CREATED_BY), or ''."""
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(CREATED_BY) or ""


def _owner_references(owner: dict[str, Any]) -> list[dict[str, Any]]:
    meta = owner["metadata"]
    return [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
             "blockOwnerDeletion": False}]


def _resource_of(document: dict[str, Any]) -> dict[str, str]:
    group, _, version = document["apiVersion"].rpartition("/")
    return {"group": group or "core", "version": version, "kind": document["kind"]}


# A create in a namespace with a ResourceQuota makes the API server update the quota's status; when its
# retries of that update all meet newer versions (other creates, the quota controller's recount), it refuses
# the create with the update's 409 Conflict, not AlreadyExists (k8s.io/apiserver v0.35.4
# pkg/admission/plugin/resourcequota/controller.go checkQuotas: "at this point, errors are fatal";
# kubernetes/kubernetes#67761). Nothing was created, so the same create is tried again after these pauses.
# Seen on the test control plane: `submit` said its job's name was taken while the Job controller made pods.
QUOTA_CONFLICT_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0)


def _quota_conflict(error: ApiException) -> bool:
    """A 409 from a ResourceQuota's status update (reason Conflict), not an object of that name (AlreadyExists)."""
    status = _status(error) or {}
    return error.status == 409 and status.get("reason") == "Conflict" and "resourcequotas" in str(status.get("message"))


# The ResourceQuota admission plugin's two refusals (k8s.io/apiserver v0.35.4
# pkg/admission/plugin/resourcequota/controller.go): a count or request past the training namespace's quota
# (components/kube/compute_quota.py, training.quota), and a counted kind whose usage the quota controller has
# not computed yet (an operator's CRD just installed: it recounts on its full resync, 5 minutes by default).
EXCEEDED_QUOTA, QUOTA_UNKNOWN = "exceeded quota: ", "status unknown for quota: "


def _quota_refusal(message: str, kind: str) -> str | None:
    """What a researcher can do about a quota's refusal of a KIND, or None if MESSAGE is not one."""
    if EXCEEDED_QUOTA in message:
        return (f"the namespace's quota refused the {kind} ({EXCEEDED_QUOTA}{message.partition(EXCEEDED_QUOTA)[2]}): "
                "nothing this command made was left; delete finished jobs (`torchfleet list`, `torchfleet delete "
                "NAME`) or ask an administrator to raise training.quota (docs/config.md)")
    if QUOTA_UNKNOWN in message:
        return (f"the cluster has not counted {kind}s for its quota yet ({message.partition(QUOTA_UNKNOWN)[2]}): "
                "its quota controller recounts within minutes of an operator's first install; nothing this "
                "command made was left: try again in a few minutes")
    return None


def _status(error: ApiException) -> dict[str, Any] | None:
    """The API server's Status object in the error's body, or None where the body is not one."""
    try:
        status = json.loads(error.body)
    except (TypeError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def _message(error: ApiException) -> str:
    status = _status(error)
    if status is None:
        return str(error.body or error.reason)
    return status.get("message") or str(error.reason)
