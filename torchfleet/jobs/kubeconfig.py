"""From a kubeconfig to a checked ApiClient: ``--kubeconfig``, ``$KUBECONFIG`` or ~/.kube/config, a context, or
the stack's kubeconfig output, each read and checked before the client uses it.

A kubeconfig of the wrong shape, a folder, an unreadable or huge file, a server that is not an http(s) URL or an
exec credential plugin that never answers (exec_auth.py) ends in a UsageError naming where the kubeconfig came
from (exit 2; a ClusterError, exit 1, when it is the stack's output), never a traceback or a hang (issues 12, 23).
The job operations on the connected cluster are cluster.py's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client, config

from torchfleet.jobs import exec_auth
from torchfleet.jobs.errors import ClusterError, UsageError

# A kubeconfig is a few KB; one with every cluster of a large company is still under a MB.
KUBECONFIG_MAX_BYTES = 16 * 1024 * 1024
# What the client raises on a kubeconfig of the wrong shape (a list where a mapping belongs, a
# missing field): a file of the user's, so exit 2, never a traceback (issue 12).
_BAD_KUBECONFIG = (config.ConfigException, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError)


def read_kubeconfig(path: Path, flag: str | None = None) -> dict[str, Any]:
    """``--kubeconfig PATH`` (or ``flag``: where else it came from) read and checked for shape; a UsageError
    naming what is wrong."""
    flag = flag or f"--kubeconfig: {path}"
    if path.is_dir():
        raise UsageError(f"{flag} is a folder; give the kubeconfig file in it (e.g. ~/.kube/config)")
    if not path.exists():
        raise UsageError(f"{flag} does not exist")
    if not path.is_file():
        raise UsageError(f"{flag} is not a regular file; give a kubeconfig file (e.g. ~/.kube/config)")
    try:
        with path.open("rb") as f:
            data = f.read(KUBECONFIG_MAX_BYTES + 1)
    except OSError as error:
        raise UsageError(f"{flag} cannot be read ({error.strerror})") from None
    if len(data) > KUBECONFIG_MAX_BYTES:
        raise UsageError(f"{flag} is larger than {KUBECONFIG_MAX_BYTES >> 20} MiB; that is not a kubeconfig")
    try:
        document = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as error:
        where = getattr(error, "problem_mark", None)
        at = f" (line {where.line + 1})" if where else ""
        raise UsageError(f"{flag} is not a kubeconfig: not YAML text{at}; `kubectl config view` shows a "
                         "valid one") from None
    if not isinstance(document, dict) or not any(k in document for k in ("clusters", "contexts", "users")):
        raise UsageError(f"{flag} is not a kubeconfig: expected a mapping with clusters, contexts and users; "
                         "`kubectl config view` shows a valid one")
    return document


def connect(
    kubeconfig: Path | None = None, context: str | None = None, kubeconfig_data: Any = None
) -> client.ApiClient:
    """An ApiClient for --kubeconfig/--context, or the stack's kubeconfig output (``kubeconfig_data``)."""
    source = f"--kubeconfig {kubeconfig}" if kubeconfig else "the kubeconfig ($KUBECONFIG or ~/.kube/config)"
    exec_auth.install()  # a credential plugin that never answers must not hang the command (issue 23)
    exec_auth.stopped.clear()
    try:
        if kubeconfig_data is not None:
            source = "the stack's kubeconfig output"
            data = yaml.safe_load(kubeconfig_data) if isinstance(kubeconfig_data, str) else kubeconfig_data
            if not isinstance(data, dict):
                raise ClusterError("--stack: the stack's kubeconfig output is not a kubeconfig document")
            api = config.new_client_from_config_dict(data, context=context, persist_config=False)
        else:
            if kubeconfig is not None:
                read_kubeconfig(Path(kubeconfig).expanduser())
            else:  # what the client reads: a folder or an unreadable file was "unexpected error", exit 1 (issue 23)
                for path, flag in _default_kubeconfigs():
                    read_kubeconfig(path, flag)
            api = config.new_client_from_config(
                config_file=str(Path(kubeconfig).expanduser()) if kubeconfig else None,
                context=context,
                persist_config=False,
            )
        if exec_auth.stopped:
            raise (UsageError if kubeconfig_data is None else ClusterError)(f"{source}: {exec_auth.stopped[-1]}")
    except config.ConfigException as error:
        message = str(error)
        if context and "context" in message.lower():
            raise UsageError(f"--context: {message}") from None
        if kubeconfig_data is not None:
            raise ClusterError(f"{source} cannot be used: {message}") from None
        if kubeconfig is not None:
            raise UsageError(f"{source}: {message}; `kubectl config view --kubeconfig {kubeconfig}` shows "
                             "what it holds") from None
        raise UsageError(
            f"no cluster to talk to ({message}); pass --stack NAME, or --kubeconfig PATH [--context NAME]"
        ) from None
    except _BAD_KUBECONFIG as error:
        what = f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
        if kubeconfig_data is not None:
            raise ClusterError(f"{source} is not a usable kubeconfig ({what})") from None
        raise UsageError(f"{source} is not a usable kubeconfig ({what}); `kubectl config view` shows what "
                         "a valid one holds") from None
    _check_server(api, source, UsageError if kubeconfig_data is None else ClusterError)
    return api


def _default_kubeconfigs() -> list[tuple[Path, str]]:
    """The files the client reads without --kubeconfig, each with how to name it: every one in $KUBECONFIG
    (a list, as kubectl takes it; missing ones are skipped, as the client does), else ~/.kube/config."""
    listed = os.environ.get("KUBECONFIG")
    if listed:
        paths = [(Path(p).expanduser(), f"$KUBECONFIG: {p}") for p in listed.split(os.pathsep) if p]
    else:
        paths = [(Path("~/.kube/config").expanduser(), "~/.kube/config")]
    return [(path, flag) for path, flag in paths if os.path.lexists(path)]


def _check_server(api: client.ApiClient, source: str, error: type[Exception]) -> None:
    """The cluster's server is an http(s) URL, before any request is made to it."""
    host = api_host(api)
    try:
        url = urllib3.util.parse_url(host)
    except (urllib3.exceptions.LocationParseError, ValueError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise error(f"{source}: the cluster's server {host!r} is not an https:// URL; fix its clusters[].server")


def api_host(api: client.ApiClient) -> str:
    """The server the client talks to, for messages."""
    return getattr(api.configuration, "host", "?")
