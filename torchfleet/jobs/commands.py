"""`torchfleet submit | sweep`: argparse wiring and the run functions (list, status, delete: inspect_commands.py;
logs: logs_command.py; the cluster options and Session every cluster command shares: session.py).

Exit codes: 0 ok; 2 usage or validation error (bad flags, unknown GPU for the stack, a taken job
name, a job that does not exist: nothing was changed); 1 cluster error (unreachable, refused).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from components import spec as platform
from components.clouds.traits import CLOUD_TRAITS
from torchfleet import cost, task_script
from torchfleet.jobs import datasets as job_datasets
from torchfleet.jobs import flag_checks, image_ref, limits, manifests, schema, script_flags, workdir, workdir_pack
from torchfleet.jobs import spec as jobspec
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import EXIT_OK, JobError, JobNotFoundError, NameTakenError, Problems, UsageError
from torchfleet.jobs.session import EXIT_DOC, cluster_options, job_client, resolve_target
from torchfleet.jobs.workdir_submit import Code, create_config_maps, remove_config_maps

USAGE = "torchfleet %s NAME [options] -- COMMAND [ARGS...]"
# A sweep of more jobs than this asks first (or needs --yes): each job may ask for GPUs (issue 13).
CONFIRM_OVER = 20


# ---------------------------------------------------------------- argparse


def _job_options(p: argparse.ArgumentParser) -> None:
    """Submit/sweep options, before or after NAME; the training command follows ``--``
    (torchfleet.cli splits it off before argparse sees the line)."""
    p.add_argument("--gpu", default=None, help="GPU type, e.g. t4 (with --stack: one of the stack's pools)")
    p.add_argument("--nodes", default="1", help="MIN:MAX nodes (e.g. 2:8) or one count (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=None,
                   help="GPUs (training processes) per node (default 1)")
    p.add_argument("--cpu", action="store_true", default=False,
                   help="a CPU job (no --gpu/--gpus-per-node): one training process per pod, sized by --cpus and "
                        "--memory; the only kind the local stack runs")
    p.add_argument("--cpus", default=None,
                   help=f"with --cpu: cores per pod, e.g. 2, 1.5 or 500m (default {jobspec.DEFAULT_CPUS})")
    p.add_argument("--memory", default=None,
                   help=f"with --cpu: memory per pod, e.g. 4Gi or 512Mi (default {jobspec.DEFAULT_MEMORY})")
    p.add_argument("--allow-egress", action="append", default=[], metavar="CIDR",
                   help="let the job's pods reach this network (repeatable, e.g. 0.0.0.0/0 for S3, HTTPS and "
                        "dataset downloads); by default they reach only their own job, etcd and DNS")
    p.add_argument("--image", default=None,
                   help="the training image (or one built on it, training-image/examples/Dockerfile.custom) "
                        "as REPO:TAG, a fixed version, not latest (or image: in -f FILE, $TORCHFLEET_IMAGE, the "
                        f"config file; default: the published {image_ref.DEFAULT_IMAGE})")
    p.add_argument("--zone", default=None, help="run every pod in this zone (default: wherever the first lands)")
    limits.add_options(p)  # --max-duration, --max-cost
    p.add_argument("--workdir", type=Path, default=None, metavar="DIR",
                   help="your code without building an image: pack DIR (what git would commit: .gitignore applies; "
                        f"at most {workdir_pack.MAX_BYTES >> 20} MiB), unpack it on the shared store under the job and "
                        "run the command there, in --image (docs/workdir.md)")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="environment variable (repeatable)")
    p.add_argument("--mount", default=jobspec.DEFAULT_MOUNT, help="where the shared claim is mounted")
    p.add_argument("--dataset", default=None, metavar="NAME[:PATH]",
                   help="mount one of the stack's datasets (torchfleet:datasets, a bucket) read-only at PATH "
                        f"(default {job_datasets.DEFAULT_ROOT}/NAME; docs/data.md)")
    p.add_argument("--run-as-user", type=int, default=platform.TRAINING_UID, metavar="UID",
                   help=f"the pods' uid, 1 to {flag_checks.UID_MAX} (default {platform.TRAINING_UID}, the training "
                        f"image's user; the group stays {platform.TRAINING_UID}, which owns the shared store)")
    p.add_argument("--cloud", choices=sorted(CLOUD_TRAITS), default=None,
                   help=f"without --stack: the cloud whose machines size the job (default {targets.DEFAULT_CLOUD})")
    p.add_argument("--recovery", choices=jobspec.RECOVERY_MODES, default="restart",
                   help="what a lost node costs: restart (default) restarts every worker from the last checkpoint; "
                        "inplace keeps the survivors training and heals a replacement from a peer (torchft: an "
                        "Indexed Job, one process per node, and a per-job Lighthouse; docs/recovery-modes.md)")
    p.add_argument("--dry-run", action="store_true", default=False,
                   help="print the YAML that would be submitted; touches no cluster and never calls Pulumi")
    p.add_argument("-f", "--file", type=Path, default=None, metavar="JOB.yaml",
                   help="a job file: its keys are these flags' names (nodes: 2:8), name, command and, for sweeps, "
                        "params; flags on the command line override it (README.md, Job files)")
    p.add_argument("-o", "--output", choices=("manifest", "job"), default="manifest",
                   help="with --dry-run: the manifests (default), or `job`: the job file these options make")


def register(sub: argparse._SubParsersAction) -> None:
    command = "the training command after --, e.g. -- python train.py --lr 0.1"
    p = sub.add_parser("submit", help="submit an elastic training job", usage=USAGE % "submit",
                       description=f"Submit a job. {EXIT_DOC}", epilog=command)
    p.add_argument("name", metavar="NAME", nargs="?",
                   help="job name (required, first, unless -f gives name:): lowercase letters, digits, '-'")
    _job_options(p)
    cluster_options(p)
    p.set_defaults(func=run_submit, takes_command=True)

    p = sub.add_parser("sweep", help="submit one job per combination of --param values", usage=USAGE % "sweep",
                       epilog=command,
                       description="Submit NAME-0, NAME-1, ... each with one combination of the --param values "
                                   f"appended to its command (--lr=0.1; lr=0.1 with --param-style hydra). {EXIT_DOC}")
    p.add_argument("name", metavar="NAME", nargs="?",
                   help="prefix of the job names (required, first, unless -f gives name:)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=V1,V2",
                   help="values to sweep (repeatable); every combination becomes one job: lr=0.1,0.01 or "
                        "--lr=0.1,0.01 appends --lr=0.1 (argparse), optimizer.lr=0.1,0.01 appends optimizer.lr=0.1 "
                        "(hydra)")
    p.add_argument("--param-style", choices=flag_checks.PARAM_STYLES, default=flag_checks.DEFAULT_PARAM_STYLE,
                   help="how the values reach the script: argparse (default: --KEY=VALUE, as the trainer's own "
                        "flags and training-image/examples/train.py take them) or hydra (KEY=VALUE overrides)")
    p.add_argument("-y", "--yes", action="store_true", default=False,
                   help=f"submit without asking when the sweep has more than {CONFIRM_OVER} jobs (required "
                        "without a terminal)")
    _job_options(p)
    cluster_options(p)
    p.set_defaults(func=run_sweep, takes_command=True)


def training_command(args: argparse.Namespace) -> list[str]:
    """What followed ``--`` on the command line (torchfleet.cli puts it in ``args.training_command``)."""
    command = getattr(args, "training_command", None)
    if not command:
        raise UsageError("the training command is missing: put it after --, e.g. -- python train.py --lr 0.1")
    return list(command)


# ---------------------------------------------------------------- shared helpers


def _request(args: argparse.Namespace, t: targets.Target, name: str, command: Sequence[str],
             overrides: Sequence[str] = (), sweep: str | None = None,
             code: workdir.Workdir | None = None) -> jobspec.JobRequest:
    found = Problems()  # a job file's problems and the limits' with the flags': all at once (issue 32)
    for problem in getattr(args, "file_problems", None) or ():
        found.add(problem)
    limits.check_flags(args, found)
    req = jobspec.build_request(
        t, name=name, gpu=args.gpu, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
        image=args.image or image_ref.DEFAULT_IMAGE,
        command=command, zone=args.zone, env=args.env, mount=args.mount, overrides=overrides, sweep=sweep,
        run_as_user=args.run_as_user, cpu=args.cpu, cpus=args.cpus, memory=args.memory,
        allow_egress=args.allow_egress, recovery=args.recovery, workdir=code, problems=found,
    )
    if not args.image:
        req = dataclasses.replace(req, notes=(*req.notes, f"--image not given: the published training image "
                                                          f"{image_ref.DEFAULT_IMAGE} (this torchfleet's version)"))
    return limits.apply(req, args, t)  # --max-duration/--max-cost: TORCHFLEET_STOP_AT (limits.py)


def _dataset(args: argparse.Namespace, t: targets.Target, req: jobspec.JobRequest) -> job_datasets.DatasetMount | None:
    """``--dataset``, checked against the stack's datasets (exit 2 before anything is sent)."""
    item = getattr(args, "dataset", None)
    if item is None:
        return None
    return job_datasets.parse_dataset(item, t.datasets, t.cloud, t.stack, req.mount)


def _documents(req: jobspec.JobRequest, t: targets.Target, dataset: job_datasets.DatasetMount | None = None,
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job and what it owns: its network policies (its own, then the --allow-egress one if
    asked) and, in-place, its Lighthouse (manifests.owned_documents)."""
    job = job_datasets.mount_into(manifests.build(req, t), dataset)
    if not manifests.is_indexed_job(job):  # an operator's resource: its CRD's schema (batch/v1 is the API server's)
        schema.validate(job)  # before anything is sent, and before a dry run prints it
    _check_label_values(job)
    return job, manifests.owned_documents(req, t)


def _check_label_values(job: dict[str, Any]) -> None:
    """Every label and node-selector value the job carries is one the API server accepts: they come
    from the flags (name, --gpu, --zone), so a bad one is the user's to fix, before anything is sent."""
    pod = manifests.worker_spec(job).get("template") or {}
    values = {**job["metadata"].get("labels", {}), **(pod.get("metadata") or {}).get("labels", {}),
              **(pod.get("spec") or {}).get("nodeSelector", {})}
    for key, value in values.items():
        flag_checks.check_label_value(f"label {key}", str(value))


class _NoAliasDumper(yaml.SafeDumper):
    """Spell out a dict used twice (the job policy's peer selector) instead of &id001/*id001."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _print_yaml(documents: Sequence[dict[str, Any]]) -> None:
    sys.stdout.write(yaml.dump_all(documents, Dumper=_NoAliasDumper, sort_keys=False, explicit_start=True))


Planned = list[tuple[jobspec.JobRequest, dict[str, Any], list[dict[str, Any]]]]


def _confirm(jobs: int) -> None:
    """Ask before a sweep of more than CONFIRM_OVER jobs; without a terminal to ask on, --yes is required."""
    if not sys.stdin.isatty():
        raise UsageError(f"--yes: this sweep submits {jobs} jobs (more than {CONFIRM_OVER}) and there is no terminal "
                         "to confirm on; add --yes to submit them (nothing was submitted)")
    print(f"submit {jobs} jobs? [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError(f"not confirmed: none of the {jobs} jobs was submitted (--yes skips the question)")


def _create_job(jobs, job: dict[str, Any], owned: list[dict[str, Any]]) -> dict[str, Any]:
    """The job's network policies first, then the job, which then becomes their owner, then the rest it owns.

    Policies first: a pod that starts before its job's policy exists can reach none of its peers (the
    namespace denies by default), and a submit that died between the two would leave a job that never
    trains. Without its policies the pods cannot reach each other (or what the job asked for), without
    its Lighthouse an in-place job cannot train: nothing is left half-made. What the job already owns
    goes with it; a policy not yet adopted is removed by name.
    """
    policies = [d for d in owned if d["kind"] == "NetworkPolicy"]
    made: list[dict[str, Any]] = []
    try:
        for policy in policies:
            jobs.create_owned(policy, None)
            made.append(policy)
        created = jobs.create(job)
    except JobError:
        _remove_policies(jobs, made)
        raise
    try:
        for policy in policies:
            jobs.adopt(policy, created)
        for document in owned:
            if document["kind"] != "NetworkPolicy":
                jobs.create_owned(document, created)
    except JobError:
        jobs.remove_created(created)
        _remove_policies(jobs, made)
        raise
    return created


def _remove_policies(jobs, policies: list[dict[str, Any]]) -> None:
    """Best effort after a failed submit: the error that ended it is the one to report."""
    for policy in policies:
        try:
            jobs.delete_policy(policy)
        except JobError as error:
            print(f"warning: could not remove network policy {policy['metadata']['name']}: {error}", file=sys.stderr)


def _submit_all(args: argparse.Namespace, plan: Callable[[targets.Target], Planned], code: Code | None = None) -> int:
    """Validate everything against the stack file first (no Pulumi, no cluster), then connect."""
    code = code or Code(argparse.Namespace(workdir=None))
    session = resolve_target(args, need_cluster=False)
    planned = plan(session.target)
    for note in [*planned[0][0].notes, *code.notes()]:
        print(f"note: {note}", file=sys.stderr)
    estimate = cost.for_jobs(session.target, [req for req, _, _ in planned])  # issue 13: cost at a glance
    if estimate is not None:
        first = planned[0][0]
        what = f"sweep {first.sweep} ({len(planned)} jobs), every job" if first.sweep else f"job {first.name}"
        print(estimate.render(f"{what} at its most nodes, one machine each"), file=sys.stderr)
    if args.dry_run:
        if args.output == "job":  # issue 13: the job file these options make (submitting it: the same manifests)
            from torchfleet.jobs import job_file

            sys.stdout.write(job_file.dump(args, args.parser, training_command(args)))
            return EXIT_OK
        _print_yaml([*code.config_maps(planned[0][0], session.target.namespace),
                     *(doc for _, job, policies in planned for doc in (job, *policies))])
        return EXIT_OK
    if args.output == "job":
        raise UsageError("-o job: only with --dry-run (it writes the job file and submits nothing)")
    if len(planned) > CONFIRM_OVER and not getattr(args, "yes", False):
        _confirm(len(planned))
    session = resolve_target(args, need_cluster=True)
    planned = plan(session.target)  # the deployed stack's outputs may name another namespace or claim
    t = session.target
    jobs = job_client(args, session)
    taken = [t for t in (_taken(jobs, req.name) for req, _, _ in planned) if t]
    if taken:
        raise NameTakenError(
            f"NAME: job(s) {', '.join(taken)} already exist in namespace {t.namespace}; choose another name "
            "or delete yours first (only a job's maker or an administrator may delete it; nothing was submitted)"
        )
    maps = create_config_maps(jobs, code.config_maps(planned[0][0], t.namespace))
    owned = False  # whether a job owns the ConfigMaps yet: until then a failure removes them here
    try:
        for req, job, documents in planned:
            _submit_one(jobs, req, job, documents, maps, t)
            owned = True
    except JobError:
        if not owned:
            remove_config_maps(jobs, maps)
        raise
    return EXIT_OK


def _taken(jobs, name: str) -> str:
    """A taken job name, with who made it (the owner policy's record) when it says; '' if it is free."""
    from torchfleet.jobs.cluster import maker

    try:
        who = maker(jobs.get(name))
    except JobNotFoundError:
        return ""
    return f"{name} (made by {who})" if who else name


def _submit_one(jobs, req: jobspec.JobRequest, job: dict[str, Any], owned: list[dict[str, Any]],
                maps: list[dict[str, Any]], t: targets.Target) -> None:
    """One job, then its share of the workdir's ConfigMaps (each job of a sweep is one more owner)."""
    created = _create_job(jobs, job, owned)
    try:
        for document in maps:
            jobs.add_owner(document, created)
    except JobError:
        jobs.remove_created(created)
        raise
    s = req.sizing
    what = f"CPU ({s.cpu_millis}m, {s.memory_mib}Mi)" if req.cpu else f"{req.gpus_per_node} {req.gpu} ({s.machine})"
    mode = " with its Lighthouse (recovery inplace)" if req.recovery == "inplace" else ""
    code = f"; code in {req.workdir.target(req.job_dir)}" if req.workdir else ""
    print(f"submitted {job['kind']} {req.name}{mode} to namespace {t.namespace}: {req.min_nodes}-{req.max_nodes} "
          f"x {what}; checkpoints in {req.checkpoint_dir}{code}")


# ---------------------------------------------------------------- commands


def run_submit(args: argparse.Namespace) -> int:
    command = training_command(args)
    task_script.check_command(command, args.workdir)  # issue 32: its Task, before anything is packed
    code = Code(args)

    def plan(t: targets.Target) -> Planned:
        req = _request(args, t, args.name, command, code=code.ref)
        dataset = _dataset(args, t, req)
        req = job_datasets.sized_for(req, dataset)
        return [(req, *_documents(req, t, dataset))]

    return _submit_all(args, plan, code)


def run_sweep(args: argparse.Namespace) -> int:
    command = training_command(args)
    params = flag_checks.parse_params(args.param, args.param_style)
    task_script.check_command(command, args.workdir)
    script = task_script.local_copy(command, args.workdir)
    if script is not None and args.param_style == "argparse":  # issue 32: before N jobs fail on argparse
        script_flags.check_params([key for key, _ in params], script, task_script.script_in(command) or "")
        script_flags.check_values(params, script, task_script.script_in(command) or "")
    combos = flag_checks.combinations(params)
    code = Code(args)

    def plan(t: targets.Target) -> Planned:
        planned = []
        for i, overrides in enumerate(combos):
            req = _request(args, t, f"{args.name}-{i}", command, overrides=overrides, sweep=args.name,
                           code=code.ref)
            dataset = _dataset(args, t, req)
            req = job_datasets.sized_for(req, dataset)
            planned.append((req, *_documents(req, t, dataset)))
        return planned

    shown = plan(resolve_target(args, need_cluster=False).target)
    for req, _, _ in shown:
        print(f"{req.name}: {' '.join(req.overrides)}", file=sys.stderr)
    return _submit_all(args, plan, code)


def _now() -> datetime:
    return datetime.now(UTC)
