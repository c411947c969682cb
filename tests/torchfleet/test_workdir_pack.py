"""``--workdir``'s packing (torchfleet/jobs/workdir_pack.py) on real git repositories in temporary folders:
git's own ignore rules, the size limit and its exit-2 message, symlinks, and a tarball that is the same
bytes for the same files."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile

import pytest
import yaml

from torchfleet.cli import main
from torchfleet.jobs import workdir_pack
from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.workdir_pack import pack


def git(repo, *args):
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        env={"PATH": os.environ["PATH"], "HOME": str(repo)},
    )


def write(root, rel, text="x", mode=None):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def members(packed) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(packed.data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository with tracked, untracked, ignored and tracked-but-ignored files."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no global excludes file of this machine's user
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q")
    write(root, ".gitignore", "data/\n*.ckpt\n")
    write(root, "train.py", "print('train')\n")
    write(root, "model/net.py", "NET = 1\n")
    write(root, "pinned.ckpt", "tracked before the rule")
    git(root, "add", "-f", ".gitignore", "train.py", "model/net.py", "pinned.ckpt")
    git(root, "commit", "-q", "-m", "start")
    write(root, "untracked.py", "new = 1\n")  # not committed yet, not ignored: packed
    write(root, "data/images.bin", "ignored")
    write(root, "last.ckpt", "ignored")
    write(root, "model/.gitignore", "scratch/\n")
    write(root, "model/scratch/tmp.txt", "ignored by the nested .gitignore")
    return root


def test_what_git_would_commit_is_packed(repo):
    packed = pack(repo)
    assert set(members(packed)) == {
        ".gitignore",
        "train.py",
        "model/net.py",
        "model/.gitignore",
        "pinned.ckpt",
        "untracked.py",
    }
    assert packed.how.startswith("git ls-files")


def test_a_tracked_file_deleted_in_the_work_tree_is_not_packed(repo):
    (repo / "model" / "net.py").unlink()
    assert "model/net.py" not in members(pack(repo))


def test_a_subfolder_of_a_repository_packs_only_itself_with_paths_from_it(repo):
    assert set(members(pack(repo / "model"))) == {".gitignore", "net.py"}


def test_outside_a_work_tree_the_gitignore_files_still_apply_by_gits_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "plain"
    write(root, ".gitignore", "*.bin\n!keep.bin\nout/\n")
    write(root, "train.py")
    write(root, "weights.bin")
    write(root, "keep.bin")  # re-included by the negation, as git would
    write(root, "out/log.txt")
    packed = pack(root)
    assert set(members(packed)) == {".gitignore", "train.py", "keep.bin"}
    assert "not a git work tree" in packed.how


def test_the_tarball_is_the_same_bytes_for_the_same_files(repo, tmp_path):
    first = pack(repo)
    os.utime(repo / "train.py", (1, 1))  # a new mtime is not a new archive
    assert pack(repo).data == first.data
    copy = tmp_path / "elsewhere"  # nor another folder, owner or umask
    subprocess.run(["cp", "-r", str(repo), str(copy)], check=True)
    assert pack(copy).sha256 == first.sha256
    write(repo, "train.py", "print('changed')\n")  # a changed file is a new archive
    assert pack(repo).sha256 != first.sha256


def test_entries_are_sorted_owned_by_root_at_a_fixed_time_with_two_modes(repo):
    write(repo, "run.sh", "#!/bin/sh\n", mode=0o750)
    (repo / "train.py").chmod(0o600)
    found = members(pack(repo))
    assert list(found) == sorted(found)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in found.values()} == {(0, 0, "", "", workdir_pack.MTIME)}
    assert (found["run.sh"].mode, found["train.py"].mode) == (0o755, 0o644)


def test_a_symlink_inside_the_folder_is_kept_relative(repo):
    (repo / "latest.py").symlink_to("train.py")
    (repo / "model" / "absolute.py").symlink_to(repo / "train.py")  # absolute, but inside
    found = members(pack(repo))
    assert found["latest.py"].issym() and found["latest.py"].linkname == "train.py"
    assert found["model/absolute.py"].linkname == "../train.py"


@pytest.mark.parametrize("target", ["/etc/passwd", "../outside.txt", "model/../../outside.txt"])
def test_a_symlink_pointing_outside_the_folder_is_refused(repo, target):
    (repo.parent / "outside.txt").write_text("secret")
    (repo / "escape").symlink_to(target)
    with pytest.raises(UsageError, match=r"--workdir: .*symlinks pointing outside it.*escape -> "):
        pack(repo)


def test_a_link_chain_that_ends_outside_is_refused(repo):
    (repo / "hop").symlink_to(repo.parent)
    (repo / "escape").symlink_to("hop")  # inside by its text, outside once followed
    with pytest.raises(UsageError, match="escape -> hop"):
        pack(repo)


def test_past_the_limit_the_error_names_the_flag_the_size_and_the_biggest_files(repo):
    write(repo, "weights.pt", "w" * 3000)
    write(repo, "vocab.txt", "v" * 2000)
    with pytest.raises(UsageError) as caught:
        pack(repo, limit=4096)
    message = str(caught.value)
    assert message.startswith(f"--workdir: {repo} holds 5.0 KiB in 8 files, more than the 4.0 KiB"), message
    assert "weights.pt (2.9 KiB)" in message
    assert message.index("weights.pt") < message.index("vocab.txt"), "biggest first"
    assert ".gitignore" in message


def test_many_small_files_are_limited_by_what_they_pack_to(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "many"
    root.mkdir()
    for i in range(200):  # 6,000 bytes that do not compress, and 200 tar headers that compress only so far
        (root / f"f{i:03d}.bin").write_bytes(os.urandom(30))
    with pytest.raises(UsageError, match=r"--workdir: .* packs to"):
        pack(root, limit=8192)


@pytest.mark.parametrize("make", ["missing", "file"])
def test_a_missing_folder_or_a_file_is_a_usage_error(tmp_path, make):
    path = tmp_path / "x"
    if make == "file":
        path.write_text("x")
    with pytest.raises(UsageError, match=r"--workdir: .* (does not exist|is not a folder)"):
        pack(path)


def test_everything_ignored_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path / "all", ".gitignore", "*\n")
    with pytest.raises(UsageError, match="no files to pack"):
        pack(tmp_path / "all")


@pytest.mark.parametrize("command", ["submit", "sweep"])
def test_the_cli_exits_2_past_the_default_limit_before_contacting_anything(repo, capsys, command):
    with (repo / "weights.pt").open("wb") as f:
        f.truncate(17 << 20)  # sparse: its size is what counts, and it is never read
    sweep = ["--param", "lr=0.1,0.2"] if command == "sweep" else []
    code = main(
        [
            command,
            "big",
            "--cpu",
            "--image",
            "registry.example.com/t:1",
            "--workdir",
            str(repo),
            *sweep,
            "--kubeconfig",
            str(repo / "no-such-kubeconfig"),
            "--",
            "python",
            "train.py",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--workdir: {repo} holds 17.0 MiB in 7 files, more than the 16.0 MiB" in err, err
    assert "the biggest files: weights.pt (17.0 MiB)" in err and "kubeconfig" not in err


def test_a_job_file_names_the_workdir_relative_to_itself(repo, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the job file's folder
    job = repo / "job.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": "from-file",
                "cpu": True,
                "image": "registry.example.com/t:1",
                "workdir": ".",
                "command": ["python", "train.py"],
            }
        )
    )
    assert main(["submit", "-f", str(job), "--dry-run"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert documents[0]["kind"] == "ConfigMap"
    assert documents[1]["spec"]["template"]["spec"]["containers"][0]["workingDir"].startswith(
        "/mnt/shared/from-file/workdir/"
    )


def test_without_git_it_refuses_rather_than_pack_what_a_gitignore_would_keep_out(repo, monkeypatch):
    monkeypatch.setenv("PATH", str(repo / "no-git-here"))
    with pytest.raises(UsageError, match="--workdir: needs git"):
        pack(repo)


def test_a_repository_named_by_git_dir_in_the_environment_is_not_the_one_read(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # left over from a git hook, say
    assert "pinned.ckpt" in members(pack(repo)), "tracked in its own repository though ignored"
