"""--image parsed by distribution/reference's grammar (issue 12): what containerd would pull, and
nothing else."""

import pytest

from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.flag_checks import check_image
from torchfleet.jobs.image_ref import ImageRef, parse

SHA256 = "a" * 64
SHA512 = "b" * 128

VALID = [
    ("train:1.0", ImageRef("", "train", "1.0", None)),
    ("registry.example.com/team/train:1.4.2", ImageRef("registry.example.com", "team/train", "1.4.2", None)),
    ("localhost:5000/train:v1", ImageRef("localhost:5000", "train", "v1", None)),
    ("[::1]:5000/team/train:v1", ImageRef("[::1]:5000", "team/train", "v1", None)),
    ("Registry.Example.com/t:1", ImageRef("Registry.Example.com", "t", "1", None)),  # the domain may have capitals
    ("a__b/c--d/e.f_g:TAG_1.x-y", ImageRef("", "a__b/c--d/e.f_g", "TAG_1.x-y", None)),  # '_': no domain
    (f"train@sha256:{SHA256}", ImageRef("", "train", None, f"sha256:{SHA256}")),
    (f"r/t:1@sha512:{SHA512}", ImageRef("r", "t", "1", f"sha512:{SHA512}")),
    ("r/t:" + "x" * 128, ImageRef("r", "t", "x" * 128, None)),
]


@pytest.mark.parametrize(("reference", "parsed"), VALID, ids=[r for r, _ in VALID])
def test_references_of_the_grammar_parse(reference, parsed):
    assert parse(reference) == parsed


INVALID = [
    ("r/t:1\n", "whitespace or control characters"),  # Go's $ does not match before a newline: nor ours
    ("r/t:1\t", "whitespace or control characters"),
    (" r/t:1", "whitespace or control characters"),
    (":1.0", "expected [REGISTRY[:PORT]/]REPO[:TAG]"),
    ("Team/Train:1", "repository names are lowercase"),
    ("r/t:" + "x" * 129, "expected"),
    ("r/t:.1", "expected"),  # a tag starts with a word character
    ("r//t:1", "expected"),
    ("r/-t:1", "expected"),
    ("r/t_:1", "expected"),
    ("r/a___b:1", "expected"),  # one or two underscores, not three
    ("r/t@sha256:zzz", "expected"),
    (f"r/t@sha256:{SHA256[:-1]}", "a sha256 digest is 64 lowercase hex digits, got 63"),
    (f"r/t@sha256:{SHA256.upper()}", "got 64 with capitals"),
    (f"r/t@md5:{'a' * 32}", "digest algorithm 'md5' is not one of sha256, sha384, sha512"),
    ("r/" + "a" * 256 + ":1", "the repository path is 256 characters, at most 255"),  # "r" is the domain
    ("r/t:1é", "expected"),  # \w is ASCII in the grammar
]


@pytest.mark.parametrize(("reference", "expected"), INVALID, ids=[r[:30] for r, _ in INVALID])
def test_references_outside_the_grammar_are_refused(reference, expected):
    with pytest.raises(UsageError, match=r"^--image: ") as error:
        parse(reference)
    assert expected in str(error.value)


@pytest.mark.parametrize("image", ["r/t", "r/t:latest", "localhost:5000/t"])
def test_a_moving_tag_is_refused(image):
    with pytest.raises(UsageError, match="names no fixed version"):
        check_image(image)


def test_latest_with_a_digest_is_pinned():
    check_image(f"r/t:latest@sha256:{SHA256}")
