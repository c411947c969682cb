"""Errors a person can act on, each carrying the exit code the command returns.

One contract for every command (issue 12): 0 done; 1 a failure outside the user's input (the
cloud, the cluster, policy violations, a node that died); 2 the input is wrong, every problem
listed, nothing created or submitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

EXIT_OK = 0
EXIT_CLUSTER = 1
EXIT_USAGE = 2
T = TypeVar("T")


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


class NotYoursError(ClusterError):
    """The cluster refused to change or delete another researcher's object, or to make a name of another's job
    (k8s/base/cluster/validatingadmissionpolicy-owner.yaml, -job-names.yaml); the message names its maker (exit 1)."""


class Problems:
    """Runs independent checks and keeps every UsageError, so one run lists all that is wrong."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def check(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T | None:
        """``fn(*args)``, or None after noting its UsageError."""
        try:
            return fn(*args, **kwargs)
        except UsageError as error:
            self.add_error(error)
            return None

    def add_error(self, error: UsageError) -> None:
        """Each problem ``error`` lists (one raised by raise_any keeps its list), not one block of them."""
        for message in getattr(error, "problems", None) or [str(error)]:
            self.add(message)

    def add(self, message: str) -> None:
        if message not in self.messages:
            self.messages.append(message)

    def raise_any(self) -> None:
        if not self.messages:
            return
        error = UsageError(self.messages[0] if len(self.messages) == 1 else
                           f"{len(self.messages)} problems:\n  " + "\n  ".join(self.messages))
        error.problems = list(self.messages)
        raise error
