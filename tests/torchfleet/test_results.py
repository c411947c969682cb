"""`torchfleet checkpoints | cp` on a folder of this machine (issue 21): what store_script.py lists and
sends from a store that cannot be trusted, and what the download makes of a stream, through the same
child-process runner --shared-dir uses. A real run's folder: tests/training_image/test_results_run.py;
the reader pod against the real API server: tests/controlplane/test_reader_pod.py.
"""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest

from tests.k8s.pod_security import restricted_problems
from torchfleet.cli import main
from torchfleet.jobs import reader_pod, results, store_access
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import ClusterError, UsageError


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def checkpoint(folder, name: str, files: dict[str, bytes], meta: object = None) -> None:
    import hashlib

    path = folder / "checkpoints" / name
    path.mkdir(parents=True)
    for file, data in files.items():
        (path / file).write_bytes(data)
    if meta is None:
        step = int(name.rsplit("-s", 1)[1])
        meta = {"step": step, "generation": 1, "created": 1000.0, "reason": "periodic",
                "files": {f: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for f, d in files.items()}}
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.fixture
def store(tmp_path):
    job = tmp_path / "store" / "run1"
    checkpoint(job, "ckpt-g000001-s0000000010", {"state.pt": b"a" * 100})
    checkpoint(job, "ckpt-g000002-s0000000005", {"state.pt": b"b" * 50})  # a newer generation outranks a step
    checkpoint(job, "ckpt-g000001-s0000000020", {"state.pt": b"c" * 10}, meta=["not", "an", "object"])
    checkpoint(job, "ckpt-g000001-s0000000030", {"state.pt": b"d" * 10},
               meta={"files": {"../etc/passwd": {"size": 1, "sha256": "0" * 64}}})
    (job / "checkpoints" / ".tmp-g000002-s0000000006-abc").mkdir()  # a write in progress: not listed
    (job / "output" / "model").mkdir(parents=True)
    (job / "output" / "model" / "model.pt").write_bytes(b"w" * 3000)
    (job / "output" / "model" / "model.json").write_text("{}")
    return tmp_path / "store"


def test_checkpoints_are_listed_newest_first_and_a_bad_meta_is_said_not_raised(store, capsys):
    code, out, err = cli(capsys, "checkpoints", "run1", "--shared-dir", str(store), "-o", "json")
    assert code == 0, err
    listed = {c["name"]: c for c in json.loads(out)["checkpoints"]}
    assert list(listed) == ["ckpt-g000002-s0000000005", "ckpt-g000001-s0000000030", "ckpt-g000001-s0000000020",
                            "ckpt-g000001-s0000000010"]
    meta = store / "run1" / "checkpoints" / "ckpt-g000001-s0000000010" / "meta.json"
    assert listed["ckpt-g000002-s0000000005"]["verified"]
    assert listed["ckpt-g000001-s0000000010"]["bytes"] == 100 + meta.stat().st_size  # what it takes on the store
    assert listed["ckpt-g000001-s0000000020"]["problem"] == "meta.json is not an object"
    assert "not a file of the checkpoint" in listed["ckpt-g000001-s0000000030"]["problem"]


def test_a_linked_checkpoint_is_refused_not_followed(store, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    checkpoint(elsewhere, "ckpt-g000009-s0000000009", {"state.pt": b"x"})
    os.symlink(elsewhere / "checkpoints" / "ckpt-g000009-s0000000009",
               store / "run1" / "checkpoints" / "ckpt-g000009-s0000000009")
    _, out, _ = cli(capsys, "checkpoints", "run1", "--shared-dir", str(store), "-o", "json")
    first = json.loads(out)["checkpoints"][0]
    assert (first["step"], first["verified"], first["problem"]) == (9, False, "not a directory (links are refused)")


def test_a_job_without_checkpoints_says_so(tmp_path, capsys):
    (tmp_path / "run2").mkdir()
    code, out, err = cli(capsys, "checkpoints", "run2", "--shared-dir", str(tmp_path))
    assert code == 0 and out == "" and "no checkpoints folder yet" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["checkpoints", "Run1"], "NAME: 'Run1' is not a job name"),
    (["checkpoints", "nope"], "NAME: no folder"),
    (["cp", "run1", "x"], "NAME:PATH: expected a job and a path"),
    (["cp", "run1:/etc", "x"], "is absolute"),
    (["cp", "run1:output/../..", "x"], "leaves the job's folder"),
    (["cp", "run1:missing", "x"], "missing: not in the job's folder"),
])
def test_bad_input_is_exit_2_naming_what_is_wrong(store, tmp_path, capsys, argv, message):
    argv = [*argv[:2], *[str(tmp_path / a) for a in argv[2:]], "--shared-dir", str(store)]
    code, _, err = cli(capsys, *argv)
    assert code == 2 and message in err, err
    assert not (tmp_path / "x").exists()


def test_cp_copies_a_folder_into_an_existing_folder_and_never_overwrites(store, tmp_path, capsys):
    (tmp_path / "into").mkdir()
    code, out, err = cli(capsys, "cp", "run1:output/model", str(tmp_path / "into"), "--shared-dir", str(store))
    assert code == 0, err
    assert (tmp_path / "into" / "model" / "model.pt").read_bytes() == b"w" * 3000
    assert "copied run1:output/model" in out and "2 files" in out
    assert err.splitlines()[-1].strip().startswith("100%  2.9 KiB of 2.9 KiB")  # no terminal: one line at the end
    code, _, err = cli(capsys, "cp", "run1:output/model", str(tmp_path / "into"), "--shared-dir", str(store))
    assert code == 2 and "exists; remove it or give another path" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".torchfleet-cp")) == []


def test_cp_of_one_file_and_of_the_whole_folder(store, tmp_path, capsys):
    code, _, err = cli(capsys, "cp", "run1:output/model/model.json", str(tmp_path / "card.json"), "--shared-dir",
                       str(store))
    assert code == 0 and (tmp_path / "card.json").read_text() == "{}", err
    code, _, err = cli(capsys, "cp", "run1:", str(tmp_path / "all"), "--shared-dir", str(store))
    assert code == 0, err
    assert (tmp_path / "all" / "checkpoints" / "ckpt-g000001-s0000000010" / "state.pt").read_bytes() == b"a" * 100


def test_links_fifos_and_paths_through_links_are_not_sent(store, tmp_path, capsys):
    output = store / "run1" / "output"
    os.symlink("/etc/passwd", output / "passwd")
    os.mkfifo(output / "pipe")  # opening it would block for ever
    os.symlink(output / "model", store / "run1" / "linked")
    code, _, err = cli(capsys, "cp", "run1:output", str(tmp_path / "out"), "--shared-dir", str(store))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model"]
    code, _, err = cli(capsys, "cp", "run1:linked", str(tmp_path / "l"), "--shared-dir", str(store))
    assert code == 2 and "passes through a symbolic link" in err


def _runner_of(payload: bytes, code: int = 0, size: int = 10):
    def runner(argv, stderr):
        if argv[0] == "size":
            yield json.dumps({"bytes": size, "files": 1, "kind": "dir"}).encode()
            return 0
        yield payload
        return code

    return runner


def _tar(*members: tarfile.TarInfo, data: bytes = b"") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return out.getvalue()


def test_a_stream_that_breaks_off_leaves_nothing_and_is_exit_1(tmp_path):
    folder = tarfile.TarInfo("output")
    folder.type = tarfile.DIRTYPE
    member = tarfile.TarInfo("output/model.pt")
    member.size = 5000
    whole = _tar(folder, member, data=b"x" * 5000)
    with pytest.raises(ClusterError, match="broke off"):
        store_access.download(_runner_of(whole[:2000]), "/job", "output", tmp_path / "dest", io.StringIO())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["/etc/evil", "output/../../evil"])
def test_a_hostile_stream_cannot_write_outside_the_destination(tmp_path, name):
    """The pod's side is the store's to say; the download refuses what would land elsewhere (untar.py; every
    hostile shape: test_download_hostile.py)."""
    member = tarfile.TarInfo(name)
    member.size = 1
    (tmp_path / "in").mkdir()
    with pytest.raises(ClusterError, match=r"was refused at '.*evil'"):
        store_access.download(_runner_of(_tar(member, data=b"x")), "/job", "output", tmp_path / "in" / "dest",
                              io.StringIO())
    assert not (tmp_path / "evil").exists() and sorted(os.listdir(tmp_path / "in")) == []


def test_the_scripts_failure_is_reported_with_its_message(tmp_path):
    def runner(argv, stderr):
        stderr.append(b'{"error": "Permission denied"}\n')
        yield b""
        return 4

    with pytest.raises(UsageError, match="output: Permission denied"):
        store_access.download(runner, "/job", "output", tmp_path / "dest", io.StringIO())


def test_parse_source_normalizes_the_path():
    assert results.parse_source("run1:output//model/") == ("run1", "output/model")
    assert results.parse_source("run1:") == ("run1", "")
    assert results.parse_source("run1:./") == ("run1", "")


JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "r", "uid": "u"}}


@pytest.mark.parametrize("owner", [None, JOB_OWNER])
def test_the_reader_pod_is_restricted_and_read_only(owner):
    target = targets.defaults("aws")
    pod = reader_pod.build_pod("r-reader-abc", "r", "/mnt/shared", "registry.example.com/t:1", target, owner)
    assert restricted_problems(pod["spec"]) == []
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    assert all(m["readOnly"] for m in container["volumeMounts"] if m["name"] == "shared")
    assert spec["automountServiceAccountToken"] is False and spec["activeDeadlineSeconds"] == reader_pod.MAX_LIFETIME_S
    assert "torchfleet.io/role" not in pod["metadata"]["labels"]  # no job policy admits it: it needs no network
    assert ("ownerReferences" in pod["metadata"]) == (owner is not None)


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"metadata":{},"status":"Success"}', 0),
    (b'{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode",'
     b'"message":"3"}]},"message":"command terminated with non-zero exit code"}', 3),
])
def test_the_exec_status_channel_gives_the_exit_code(raw, expected):
    assert reader_pod.exit_code(raw, "p") == expected


@pytest.mark.parametrize("raw", [
    b'{"metadata":{},"status":"Failure","message":"error sending request: Post \\"https://127.0.0.1:10250/exec\\""}',
    b"", b"not: [yaml", b"[]",
])
def test_an_exec_that_did_not_run_is_a_cluster_error_not_a_value_error(raw):
    """Regression: the client's returncode did int() on the first cause's message, a ValueError for a
    Status that is no exit code (the API server could not reach the kubelet)."""
    with pytest.raises(ClusterError, match="exec in the reader pod p"):
        reader_pod.exit_code(raw, "p")


def test_a_local_runs_folder_is_read_with_local(store, tmp_path, capsys):
    """`torchfleet run --local` writes torchfleet-runs/NAME: --local DIR reads it as status --local does."""
    code, out, err = cli(capsys, "checkpoints", "--local", str(store / "run1"), "-o", "json")
    assert code == 0 and len(json.loads(out)["checkpoints"]) == 4, err
    code, out, err = cli(capsys, "cp", ":output/model", str(tmp_path / "m"), "--local", str(store / "run1"))
    assert code == 0 and (tmp_path / "m" / "model.pt").read_bytes() == b"w" * 3000, err
    assert "copied run1:output/model" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["checkpoints"], "required: NAME (a job's name) or --local DIR"),
    (["checkpoints", "run1", "--local", "{store}/run1"], "required: NAME (a job's name) or --local DIR"),
    (["checkpoints", "--local", "{store}/nope"], "--local: "),
    (["cp", "run1:output", "{tmp}/x", "--local", "{store}/run1"], "with --local the folder is the run, so give :PATH"),
])
def test_local_is_one_of_name_or_local(store, tmp_path, capsys, argv, message):
    argv = [a.format(store=store, tmp=tmp_path) for a in argv]
    code, _, err = cli(capsys, *argv)
    assert code == 2 and message in err, err


def test_a_linked_or_fifo_meta_json_is_not_read(store, tmp_path, capsys):
    folder = store / "run1" / "checkpoints" / "ckpt-g000003-s0000000001"
    folder.mkdir()
    (tmp_path / "meta.json").write_text('{"files": {"state.pt": {"size": 0, "sha256": "' + "0" * 64 + '"}}}')
    os.symlink(tmp_path / "meta.json", folder / "meta.json")
    fifo = store / "run1" / "checkpoints" / "ckpt-g000003-s0000000002"
    fifo.mkdir()
    os.mkfifo(fifo / "meta.json")  # opening it to read would block for ever
    code, out, err = cli(capsys, "checkpoints", "run1", "--shared-dir", str(store), "-o", "json")
    assert code == 0, err
    found = {c["step"]: c for c in json.loads(out)["checkpoints"] if c["generation"] == 3}
    assert {s: (c["verified"], c["problem"]) for s, c in found.items()} == {
        1: (False, "meta.json is not a regular file"), 2: (False, "meta.json is not a regular file")}


@pytest.mark.parametrize(("argv", "form"), [
    (["cp", "output/model", "m2", "--shared-dir", "/nonexistent"], "NAME:output/model, e.g. resnet:output/model"),
    (["cp", "output/model", "m2", "--local", "/nonexistent/run1"], "so give :PATH: :output/model"),
])
def test_cp_without_a_colon_shows_the_user_s_path_in_the_form_that_works(argv, form, capsys):
    """`cp output/model ./m2 --local DIR` suggested `e.g. resnet:output`: neither the path given nor, with --local,
    the form that works (:PATH)."""
    code, _, err = cli(capsys, *argv)
    assert code == 2 and form in err, err
