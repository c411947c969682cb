"""`--image`: an image reference parsed by the grammar the container runtimes use.

The grammar is distribution/reference's (github.com/distribution/reference v0.6.0, regexp.go and
reference.go), which containerd and the kubelet parse image names with:

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [domain "/"] path-component ["/" path-component]*
    domain     := (domain-name | "[" ipv6 "]") [":" port]
    path-component := [a-z0-9]+ (separator [a-z0-9]+)*    separator := [._] | __ | -+
    tag        := [\\w][\\w.-]{0,127}
    digest     := algorithm ":" hex

The path is at most 255 characters (RepositoryNameTotalLengthMax), and a digest's hex must have
its algorithm's length (opencontainers/go-digest algorithm.go: sha256, sha384, sha512), in
lowercase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchfleet import __version__
from torchfleet.jobs.errors import UsageError

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# re.ASCII: Go's \w is [0-9A-Za-z_]; fullmatch: Go's $ does not match before a trailing newline.
_REFERENCE = re.compile(rf"((?:{_DOMAIN}/)?{_REMOTE_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?", re.ASCII)
_NAME = re.compile(rf"(?:({_DOMAIN})/)?({_REMOTE_NAME})", re.ASCII)
PATH_MAX = 255
DIGEST_HEX_LENGTH = {"sha256": 64, "sha384": 96, "sha512": 128}
EXAMPLE = "registry.example.com/team/train:1.4.2"
# The training image a submit runs without --image (issue 32): the one the release workflow publishes
# (.github/workflows/image.yml: ghcr.io/<owner, lowercased>/torchfleet-trainer:<tag without its v>), at this
# package's own version, so a CLI release and the image of the same tag go together. Every doc example
# names it (tests/torchfleet/test_default_image.py); a fork that publishes under its own owner changes
# PUBLISHED_REPOSITORY here, or sets image: in its config file.
PUBLISHED_REPOSITORY = "ghcr.io/torchfleet/torchfleet-trainer"
DEFAULT_IMAGE = f"{PUBLISHED_REPOSITORY}:{__version__}"


@dataclass(frozen=True)
class ImageRef:
    domain: str  # "" when the reference names none (Docker Hub)
    path: str
    tag: str | None
    digest: str | None


def parse(reference: str) -> ImageRef:
    """The reference's parts; a UsageError naming what is wrong and what would be right."""
    bad = f"--image: {reference!r} is not an image reference"
    match = _REFERENCE.fullmatch(reference)
    if match is None:
        if reference.lower() != reference and _REFERENCE.fullmatch(reference.lower()):
            raise UsageError(f"{bad}: repository names are lowercase (tags may have capitals), e.g. {EXAMPLE}")
        if any(c.isspace() or not c.isprintable() for c in reference):
            raise UsageError(f"{bad}: it contains whitespace or control characters; give REPO:TAG, e.g. {EXAMPLE}")
        raise UsageError(
            f"{bad}: expected [REGISTRY[:PORT]/]REPO[:TAG][@sha256:HEX], where REPO is lowercase letters, digits "
            f"and . _ - between slashes and TAG is up to 128 letters, digits, _ . - (e.g. {EXAMPLE})"
        )
    name, tag, digest = match.groups()
    first, slash, rest = name.partition("/")
    if slash and first != first.lower() and not any(c in first for c in ".:"):
        # The grammar takes UPPER/case (the domain may have capitals), and so does the runtime, as a
        # registry host: distribution/reference normalize.go splitDockerDomain reads the first part as
        # a host when it has a '.' or ':', is localhost, or has capitals. A Docker Hub namespace typed
        # in capitals would be pulled from https://UPPER/ and fail at the pull (issue 23, a doubt).
        raise UsageError(
            f"{bad}: {first!r} has capitals, so the container runtime takes it for a registry host, not a Docker "
            f"Hub namespace; Docker Hub names are lowercase ({first.lower()}/{rest}), and a registry host has a "
            f"dot or a port, e.g. {EXAMPLE}"
        )
    domain, path = _NAME.fullmatch(name).groups()
    if len(path) > PATH_MAX:
        raise UsageError(f"{bad}: the repository path is {len(path)} characters, at most {PATH_MAX}")
    if digest is not None:
        algorithm, _, hex_ = digest.partition(":")
        length = DIGEST_HEX_LENGTH.get(algorithm)
        if length is None:
            raise UsageError(f"{bad}: digest algorithm {algorithm!r} is not one of "
                             f"{', '.join(DIGEST_HEX_LENGTH)}, e.g. @sha256:<64 hex digits>")
        if len(hex_) != length or hex_ != hex_.lower():
            got = f"{len(hex_)}" + (" with capitals" if hex_ != hex_.lower() else "")
            raise UsageError(f"{bad}: a {algorithm} digest is {length} lowercase hex digits, got {got}")
    return ImageRef(domain or "", path, tag, digest)
