"""A kubeconfig's exec credential plugin (``users[].user.exec``), bounded in time (issue 23).

The Kubernetes client runs the plugin (``aws eks get-token``, ``gke-gcloud-auth-plugin``,
``kubelogin``) with ``Popen(...).communicate()`` and no timeout (kubernetes 37.0.2,
``kubernetes/config/exec_provider.py``, ``ExecProvider.run``), so a plugin that never answers
hung `torchfleet list` for ever. Here its ``communicate`` gets a bound: past it the plugin is
killed. The client logs and swallows any error of the plugin's (``_load_from_exec_plugin``) and
goes on without credentials, so the reason is also kept in ``stopped``: connect() turns it into
exit 2 naming the command.
"""

from __future__ import annotations

import subprocess
import types

from kubernetes.config import exec_provider
from kubernetes.config.config_exception import ConfigException

# Long enough for a plugin that asks on the terminal (an SSO or MFA prompt), short enough that a
# hung one ends: a token from aws or gcloud's plugin takes a second or two.
EXEC_TIMEOUT_S = 120.0
# why each plugin run that timed out was stopped, for connect() to report (the client swallows it)
stopped: list[str] = []


class _BoundedPopen(subprocess.Popen):
    def communicate(self, input=None, timeout=None):  # Popen's own signature
        try:
            return super().communicate(input, timeout=EXEC_TIMEOUT_S if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            super().communicate()  # reap it
            command = self.args[0] if isinstance(self.args, list | tuple) and self.args else self.args
            stopped.append(
                f"the credential plugin {command!r} (users[].user.exec.command) gave no answer in "
                f"{EXEC_TIMEOUT_S:.0f} s and was stopped; run it yourself to see what it waits for"
            )
            raise ConfigException(f"exec: {stopped[-1]}") from None


def install() -> None:
    """Make the client's exec plugin runs bounded (idempotent): its module sees our ``subprocess``."""
    if getattr(exec_provider.subprocess, "Popen", None) is _BoundedPopen:
        return
    bounded = types.ModuleType("subprocess")
    bounded.__dict__.update(vars(subprocess))
    bounded.Popen = _BoundedPopen
    exec_provider.subprocess = bounded
