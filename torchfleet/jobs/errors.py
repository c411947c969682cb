"""Errors a person can act on, each carrying the exit code the command returns."""

from __future__ import annotations

EXIT_OK = 0
EXIT_CLUSTER = 1
EXIT_USAGE = 2


class JobError(Exception):
    exit_code = EXIT_USAGE


class UsageError(JobError):
    """Bad flags or a job the platform would refuse: nothing was submitted (exit 2).

    The message starts with the flag and says what would be right.
    """

    exit_code = EXIT_USAGE


class NameTakenError(UsageError):
    """The job name is taken in the namespace: pick another or delete the old job (exit 2)."""


class JobNotFoundError(UsageError):
    """No job of that name in the namespace (exit 2): the name is the thing to fix."""


class ClusterError(JobError):
    """The cluster is unreachable or refused a request for reasons other than the input (exit 1)."""

    exit_code = EXIT_CLUSTER
