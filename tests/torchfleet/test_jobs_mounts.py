"""--mount normalized and kept off the paths the container needs (issue 12)."""

import pytest

from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.mounts import RESERVED, normalize_mount


@pytest.mark.parametrize(("mount", "normalized"), [
    ("/mnt/shared", "/mnt/shared"), ("/mnt/shared/", "/mnt/shared"), ("//data", "/data"),
    ("///data//x/", "/data/x"), ("/data/./x", "/data/x"), ("/data/x/../y", "/data/y"),
    ("/home/me/store", "/home/me/store"), ("/var/tmp", "/var/tmp"), ("/opt/data", "/opt/data"),
])
def test_mount_paths_are_normalized(mount, normalized):
    assert normalize_mount(mount) == normalized


@pytest.mark.parametrize("mount", [
    "/", "/etc", "/mnt/../etc", "//proc", "/proc/../proc/x", "/dev/shm", "/sys/fs", "/usr/local", "/var",
    "/var/run/secrets", "/workspace", "/workspace/data", "/..", "/run",
    "/opt", "/opt/", "/opt/conda", "/opt/conda/lib/python3.11", "/mnt/../opt",  # the image's Python (issue 23)
])
def test_system_paths_are_refused(mount):
    with pytest.raises(UsageError, match=r"^--mount: .* the container needs"):
        normalize_mount(mount)


@pytest.mark.parametrize(("mount", "expected"), [
    ("mnt/shared", "expected an absolute path"), ("", "expected an absolute path"), ("/a b", "has characters"),
    ("/a\nb", "has characters"), ("/a:b", "has characters"), ("/" + "a" * 300, "at most 255"),
])
def test_malformed_paths_are_refused(mount, expected):
    with pytest.raises(UsageError, match=r"^--mount: ") as error:
        normalize_mount(mount)
    assert expected in str(error.value)


def test_every_reserved_path_is_refused_itself_and_below():
    for root in RESERVED:
        for path in (root, f"{root}/x"):
            with pytest.raises(UsageError):
                normalize_mount(path)
