"""`torchfleet upload LOCAL DEST`: each destination's checks (exit 2 naming the argument, nothing copied),
the cloud CLI command each bucket gets, a run through that command, and the whole-or-nothing local copy."""

from __future__ import annotations

import argparse
import io
import os
import stat
import sys

import pytest

from torchfleet import data_upload
from torchfleet.jobs.errors import ClusterError, UsageError

STACK = """
config:
  aws:region: us-east-1
  torchfleet:cloud: aws
  torchfleet:zones: [us-east-1a, us-east-1b]
  torchfleet:network: {publicAccessCidrs: [203.0.113.0/24]}
  torchfleet:gpuPools: [{gpu: t4, maxNodes: 4}]
  torchfleet:datasets: [{name: imagenet, bucket: corp-imagenet, prefix: train/}]
"""


def args(tmp_path, local, dest, *, stack=None, dry_run=False):
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "stacks" / "Pulumi.data.yaml").write_text(STACK)
    return argparse.Namespace(local=local, dest=dest, stack=stack, stacks_dir=tmp_path / "stacks", dry_run=dry_run)


@pytest.fixture
def folder(tmp_path):
    src = tmp_path / "imagenet"
    (src / "n01").mkdir(parents=True)
    (src / "n01" / "a.jpg").write_bytes(os.urandom(300_000))
    (src / "labels.txt").write_text("n01\n")
    return src


@pytest.mark.parametrize(
    ("dest", "cloud", "bucket", "prefix"),
    [
        ("s3://corp-imagenet/train", "aws", "corp-imagenet", "train/"),
        ("s3://corp-imagenet", "aws", "corp-imagenet", ""),
        ("gs://corp_imagenet/a/b/", "gcp", "corp_imagenet", "a/b/"),
        ("az://corpdata/imagenet/train", "azure", "corpdata/imagenet", "train/"),
    ],
)
def test_a_bucket_url_is_parsed(dest, cloud, bucket, prefix):
    assert data_upload.parse_bucket(dest) == data_upload.Bucket(cloud, bucket, prefix)


@pytest.mark.parametrize(
    ("dest", "words"),
    [
        ("s3://", "expected s3://BUCKET[/PREFIX]"),
        ("s3://Corp_Data/x", "not a bucket name aws accepts"),
        ("gs://goog-data", "'goog'"),
        ("az://corpdata", "az://ACCOUNT/CONTAINER"),
        ("az://corpdata/a--b", "container"),
        ("s3://corp-data/../x", "'..'"),
    ],
)
def test_a_bad_bucket_url_is_refused(dest, words):
    with pytest.raises(UsageError, match=r"^DEST: ") as caught:
        data_upload.parse_bucket(dest)
    assert words in str(caught.value)


def test_a_stacks_dataset_names_its_bucket_and_prefix(tmp_path, folder):
    a = args(tmp_path, folder, "dataset:imagenet/val", stack="data")
    assert data_upload.dataset_bucket(a.dest, a.stack, a.stacks_dir) == data_upload.Bucket(
        "aws", "corp-imagenet", "train/val/")


@pytest.mark.parametrize(
    ("dest", "stack", "words"),
    [
        ("dataset:imagenett", "data", "stack data has no dataset 'imagenett'; its datasets: imagenet"),
        ("dataset:imagenet", None, "give --stack"),
        ("dataset:imagenet/../x", "data", "'..'"),
        ("ftp://host/x", None, "ftp:// is not a bucket"),
    ],
)
def test_bad_destinations_exit_2_before_anything_runs(tmp_path, folder, dest, stack, words, monkeypatch):
    monkeypatch.setattr(data_upload.subprocess, "run", lambda *a, **k: pytest.fail("ran a command"))
    with pytest.raises(UsageError) as caught:
        data_upload.run(args(tmp_path, folder, dest, stack=stack))
    assert words in str(caught.value) and caught.value.exit_code == 2


def test_local_must_be_a_folder(tmp_path):
    with pytest.raises(UsageError, match=r"^LOCAL: "):
        data_upload.run(args(tmp_path, tmp_path / "missing", "s3://corp-data"))


@pytest.mark.parametrize(
    ("bucket", "tools", "command"),
    [
        (data_upload.Bucket("aws", "b", "p/"), {"aws"}, ["aws", "s3", "sync", "SRC", "s3://b/p/"]),
        (data_upload.Bucket("gcp", "b", ""), {"gcloud", "gsutil"},
         ["gcloud", "storage", "rsync", "--recursive", "SRC", "gs://b/"]),
        (data_upload.Bucket("gcp", "b", ""), {"gsutil"}, ["gsutil", "-m", "rsync", "-r", "SRC", "gs://b/"]),
        (data_upload.Bucket("azure", "acct/cont", "p/"), {"azcopy", "az"},
         ["azcopy", "sync", "SRC", "https://acct.blob.core.windows.net/cont/p/", "--recursive"]),
        (data_upload.Bucket("azure", "acct/cont", "p/"), {"az"},
         ["az", "storage", "blob", "upload-batch", "--auth-mode", "login", "--account-name", "acct",
          "--destination", "cont", "--destination-path", "p", "--source", "SRC"]),
    ],
)
def test_each_cloud_gets_its_own_cli(bucket, tools, command):
    assert data_upload.bucket_command("SRC", bucket, which=lambda t: t in tools) == command


def test_no_cli_for_the_cloud_says_what_to_install():
    with pytest.raises(UsageError, match="needs the AWS CLI"):
        data_upload.bucket_command("SRC", data_upload.Bucket("aws", "b"), which=lambda t: False)


def fake_tool(tmp_path, name, code):
    """An executable NAME on PATH that records its arguments and what LOCAL holds, then exits CODE:
    the cloud CLI stands in for a bucket no test can reach."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump({{'argv': sys.argv[1:], 'files': sorted(os.listdir(sys.argv[3]))}}, "
                    f"open({str(tmp_path / 'called.json')!r}, 'w'))\nsys.exit({code})\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_a_dataset_upload_runs_the_clouds_cli(tmp_path, folder, monkeypatch, capsys):
    import json

    monkeypatch.setenv("PATH", f"{fake_tool(tmp_path, 'aws', 0)}{os.pathsep}{os.environ['PATH']}")
    assert data_upload.run(args(tmp_path, folder, "dataset:imagenet", stack="data")) == 0
    called = json.loads((tmp_path / "called.json").read_text())
    assert called == {"argv": ["s3", "sync", str(folder), "s3://corp-imagenet/train/"],
                      "files": ["labels.txt", "n01"]}
    assert "uploaded" in capsys.readouterr().out


def test_a_failed_upload_is_exit_1_and_says_to_rerun(tmp_path, folder, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_tool(tmp_path, 'aws', 3)}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ClusterError, match="aws exited 3 uploading to s3://corp-data/; run it again") as caught:
        data_upload.run(args(tmp_path, folder, "s3://corp-data"))
    assert caught.value.exit_code == 1


def test_dry_run_prints_the_command_and_runs_nothing(tmp_path, folder, monkeypatch, capsys):
    monkeypatch.setattr(data_upload.subprocess, "run", lambda *a, **k: pytest.fail("ran a command"))
    monkeypatch.setattr(data_upload.shutil, "which", lambda t: t == "aws")
    assert data_upload.run(args(tmp_path, folder, "s3://corp-data/x", dry_run=True)) == 0
    assert capsys.readouterr().out.strip() == f"aws s3 sync {folder} s3://corp-data/x/"


def test_a_local_folder_is_copied_whole_with_progress(tmp_path, folder):
    store = tmp_path / "store"
    store.mkdir()
    stream = io.StringIO()
    final = data_upload.copy_folder(folder, store, stream)
    assert final == store / "imagenet"
    assert (final / "n01" / "a.jpg").read_bytes() == (folder / "n01" / "a.jpg").read_bytes()
    assert (final / "labels.txt").read_text() == "n01\n"
    assert stream.getvalue().strip().startswith("100%") and "293.0 KiB of 293.0 KiB" in stream.getvalue()
    assert [p.name for p in store.iterdir()] == ["imagenet"]  # no partial folder left
    assert stat.S_IMODE(final.stat().st_mode) == 0o755


def test_an_existing_destination_is_not_overwritten(tmp_path, folder):
    (tmp_path / "store" / "imagenet").mkdir(parents=True)
    with pytest.raises(UsageError, match="exists; remove it"):
        data_upload.copy_folder(folder, tmp_path / "store")


def test_a_link_in_local_is_refused(tmp_path, folder):
    (folder / "outside").symlink_to("/etc")
    (tmp_path / "store").mkdir()
    with pytest.raises(UsageError, match="symbolic link"):
        data_upload.copy_folder(folder, tmp_path / "store")
    assert list((tmp_path / "store").iterdir()) == []


def test_a_copy_that_fails_leaves_nothing(tmp_path, folder, monkeypatch):
    (tmp_path / "store").mkdir()
    real_fsync = os.fsync
    calls = []

    def failing_fsync(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(data_upload.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        data_upload.copy_folder(folder, tmp_path / "store")
    assert list((tmp_path / "store").iterdir()) == []


def test_dry_run_without_the_cli_shows_the_command_and_what_to_install(tmp_path, folder, monkeypatch, capsys):
    monkeypatch.setattr(data_upload.shutil, "which", lambda t: None)
    assert data_upload.run(args(tmp_path, folder, "gs://corp-data", dry_run=True)) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"gcloud storage rsync --recursive {folder} gs://corp-data/"
    assert "needs the Google Cloud CLI" in err


def test_a_real_run_without_the_cli_is_refused(tmp_path, folder, monkeypatch):
    monkeypatch.setattr(data_upload.shutil, "which", lambda t: None)
    monkeypatch.setattr(data_upload.subprocess, "run", lambda *a, **k: pytest.fail("ran a command"))
    with pytest.raises(UsageError, match="needs AzCopy"):
        data_upload.run(args(tmp_path, folder, "az://corpdata/imagenet"))


def test_the_command_line_has_upload(capsys):
    from torchfleet.cli import main

    assert main(["upload", "training-image", "s3://my-team-datasets/examples", "--dry-run"]) == 0
    assert capsys.readouterr().out.split()[-1] == "s3://my-team-datasets/examples/"
    assert main(["upload", "training-image", "s3://My_Bucket", "--dry-run"]) == 2
    assert "DEST: 'My_Bucket' is not a bucket name aws accepts" in capsys.readouterr().err
