"""Every reference by name to a section of the README or of a doc, in stacks/ and docs/, names a heading that
exists (issue 32, a second fresh walk: stacks/Pulumi.local.yaml pointed to README "Local quickstart (kind)",
which had moved to docs/deploy-local.md; the GCP and Azure stacks pointed to README sections that had
moved the same way). The forms matched: README "X", README, "X", README's "X", README.md, "X",
training-image/README.md, "X" and docs/NAME.md, "X"; a section is a heading or a paragraph's bold lead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.harness import REPO

REFERENCE = re.compile(r"""((?:[\w.-]+/)*README(?:\.md)?|docs/[\w.-]+\.md)(?:'s|,)?\s*(?:#\s*)?"([^"\n]+)\"""")


def _headings(path: Path) -> set[str]:
    """Its Markdown headings, and the bold leads of its paragraphs (`**Private only**: ...`)."""
    text = path.read_text()
    return ({line.lstrip("#").strip() for line in text.splitlines() if re.match(r"#{1,6} ", line)}
            | set(re.findall(r"\*\*([^*\n]+)\*\*", text)))


def _references() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted([*REPO.glob("stacks/*.yaml"), *REPO.glob("docs/*.md")]):
        text = path.read_text()
        for match in REFERENCE.finditer(text):
            found.append((str(path.relative_to(REPO)), match.group(1), match.group(2)))
    return found


def test_the_references_are_found():
    # the check cannot pass by matching nothing: the stacks and docs do name sections this way
    assert {(where, what) for where, what, _ in _references()} >= {
        ("stacks/Pulumi.local.yaml", "docs/deploy-local.md"), ("docs/solo.md", "README")}


@pytest.mark.parametrize(("where", "target", "section"), _references())
def test_a_named_section_exists(where, target, section):
    target_file = REPO / (target if target.endswith(".md") else f"{target}.md")
    assert target_file.is_file(), f"{where}: {target} does not exist"
    assert section in _headings(target_file), f"{where}: {target} has no section {section!r}"


def test_the_old_dangling_reference_would_be_caught():
    assert "Local quickstart (kind)" not in _headings(REPO / "README.md")
