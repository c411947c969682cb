"""The real Pulumi engine on this project's program: the CLI and pulumi-resource-kubernetes that
build.py builds from their pinned Go modules, a file backend in a temporary folder, nothing
downloaded and nothing read from the user's ~/.pulumi or PATH.

    engine = Engine.create(workdir, kubeconfig, stack_config)   # copies Pulumi.yaml, logs in, stack init
    engine.pulumi("up", "--yes")                                 # a CompletedProcess; raises on failure

The Python language host. Pulumi's own (pulumi-language-python) is a Go module of its own,
github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3, that pulumi/pulumi never tags,
and the Go module proxy serves no version of it: its list, a tag, a pseudo-version of a release
commit each get `403 Forbidden ... This module version is not available`. The engine only talks
to a language host over gRPC (the LanguageRuntime service), and the Python SDK pinned in
pyproject.toml ships a server of that service: pulumi.automation's LanguageServer, which the
Automation API runs for inline programs, handing the CLI its address with `--client` (a CLI flag
since 3.181, pulumi/automation/_stack.py). `python -m tests.controlplane.pulumi_engine ARGS` does
the same for this project's __main__.py, in a process of its own (the program sets the SDK's
global runtime state, which the test process's own mock tests use), then runs the CLI with ARGS.
What that host does not do that pulumi-language-python does: create or check the virtualenv that
Pulumi.yaml names (this process is already in it) and report the program's required plugins
(nothing is installed here anyway: the provider comes from the project's `plugins:` below).

The provider. The copy of Pulumi.yaml in the work folder names build.py's bin folder as the
`kubernetes` provider's path (Pulumi.yaml `plugins: providers:`, meant for a plugin under
development: the engine then takes no other one, of any version), PULUMI_IGNORE_AMBIENT_PLUGINS
keeps it from taking any pulumi-resource-* on PATH, and PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION
makes a plugin it cannot find an error instead of a download (pulumi/sdk/go/common/workspace/
plugins.go getPluginInfoAndPath, pulumi/sdk/go/common/env/env.go). The local stack registers
Kubernetes resources only: components/platform.py imports a cloud's module only for its cloud.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.controlplane import build

REPO = Path(__file__).resolve().parents[2]
# The CLI commands that run the program, and so need the language host.
RUNS_PROGRAM = ("up", "preview", "destroy", "refresh")
# Only the test's passphrase for the test's own file backend: the stack's secrets (the kubeconfig
# output) are encrypted with it in the temporary state.
PASSPHRASE = "torchfleet-controlplane-test"


class EngineError(RuntimeError):
    pass


@dataclass(frozen=True)
class Engine:
    workdir: Path  # the project's copy (Pulumi.yaml, stacks/), the state and PULUMI_HOME
    kubeconfig: Path
    stack: str = "local"

    @classmethod
    def create(cls, workdir: Path, kubeconfig: Path, stack_config: dict, stack: str = "local") -> Engine:
        """Lay out the work folder, log in to its file backend and create the stack."""
        try:
            build.ensure("pulumi", "pulumi-resource-kubernetes")
        except build.BuildError as error:
            raise EngineError(f"the Pulumi engine could not be built: {error}") from error
        project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
        project["plugins"] = {"providers": [{"name": "kubernetes", "path": str(build.BIN)}]}
        (workdir / "stacks").mkdir(parents=True, exist_ok=True)
        (workdir / "state").mkdir(exist_ok=True)
        (workdir / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
        (workdir / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(stack_config, sort_keys=False))
        engine = cls(workdir, kubeconfig, stack)
        engine.cli("login", f"file://{workdir / 'state'}")
        engine.cli("stack", "init", stack, "--secrets-provider", "passphrase")
        return engine

    def env(self) -> dict[str, str]:
        # Nothing of the caller's Pulumi, Kubernetes or OpenTelemetry settings leaks in.
        kept = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "KUBE", "OTEL_"))}
        return {
            **kept,
            "PULUMI_HOME": str(self.workdir / "home"),
            "PULUMI_BACKEND_URL": f"file://{self.workdir / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",  # the one call home the CLI makes on its own
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
            "KUBECONFIG": str(self.kubeconfig),  # the explicit provider of clouds/local.py reads it
            "PYTHONPATH": str(REPO),
            "NO_COLOR": "1",
        }

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The CLI alone (no program): login, stack, config, export."""
        return self._run([str(build.path("pulumi")), *args], args, timeout)

    def pulumi(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`pulumi ARGS --stack STACK --non-interactive`, the program served by this module's host."""
        command = [*args, "--stack", self.stack, "--non-interactive"]
        return self._run([sys.executable, "-m", "tests.controlplane.pulumi_engine", *command], command, timeout)

    def _run(
        self, command: list[str], shown: tuple[str, ...] | list[str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        # Its output goes to a log as it comes, so a run that hangs still shows where it was.
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        log = logs / f"{len(list(logs.iterdir())):02d}-{shown[0]}.log"
        with log.open("w") as out:
            # A session of its own: the CLI and the providers it starts end with it, even when a
            # timeout (this one or pytest's) cuts the run short.
            process = subprocess.Popen(
                command, cwd=self.workdir, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                returncode = process.wait(timeout)
            except subprocess.TimeoutExpired:
                raise EngineError(f"`pulumi {' '.join(shown)}` ran past {timeout} s:\n{_tail(log)}") from None
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        if returncode != 0:
            raise EngineError(f"`pulumi {' '.join(shown)}` exited {returncode}:\n{_tail(log)}")
        return subprocess.CompletedProcess(command, 0, log.read_text(), "")


def _tail(log: Path, chars: int = 8000) -> str:
    return log.read_text(errors="replace")[-chars:]


# A test's own program instead of the project's __main__.py (tests/controlplane/programs/), named by path.
PROGRAM_VARIABLE = "TORCHFLEET_ENGINE_PROGRAM"


def _program() -> None:
    runpy.run_path(os.environ.get(PROGRAM_VARIABLE) or str(REPO / "__main__.py"), run_name="__main__")


def main(argv: list[str]) -> int:
    """Run the CLI with ARGV; for a command that runs the program, serve it to the CLI first."""
    import grpc
    from pulumi.automation._server import LanguageServer  # the Automation API's inline host
    from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
    from pulumi.runtime.proto import language_pb2_grpc

    command = [str(build.path("pulumi")), *argv]
    server = None
    if argv and argv[0] in RUNS_PROGRAM:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_GRPC_CHANNEL_OPTIONS)
        language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(_program), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        command += [f"--client=127.0.0.1:{port}", "--exec-kind", "auto.inline"]
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        if server is not None:
            server.stop(0)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
