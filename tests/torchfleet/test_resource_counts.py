"""One stack, one count per thing counted (a reviewer's walk: synth said 130 resources, check 177 and the
README 129 for aws-usw2). synth's "N resources" is what `pulumi up` makes; check runs its rules over every
registered resource (those, the components that group them, the providers) and now says both; the README
names no count that synth does not print (its timing row's size is docs/benchmarks.md's, dated)."""

from __future__ import annotations

import re

from tests.harness import REPO
from torchfleet import synth_summary
from torchfleet.cli import main
from torchfleet.preview.runner import synth_file

STACK = REPO / "stacks" / "Pulumi.aws-usw2.yaml"


def _synth_count(capsys) -> int:
    assert main(["synth", "--stack-file", str(STACK)]) == 0
    return int(re.search(r"^(\d+) resources \(", capsys.readouterr().out, re.M).group(1))


def test_check_names_synth_s_count_and_what_else_its_rules_see(capsys):
    made = _synth_count(capsys)
    main(["check", "--stack-file", str(STACK)])
    err = capsys.readouterr().err
    m = re.search(r"rules over (\d+) registered: (\d+) resources \(synth's count\), (\d+) components, (\d+) provider",
                  err)
    assert m, err
    registered, checked_made, components, providers = map(int, m.groups())
    assert checked_made == made and registered == made + components + providers
    result = synth_file(STACK)
    assert synth_summary.counts(result.resources) == (made, components, providers)
    assert registered == len(result.resources)


def test_the_readme_names_no_resource_count_synth_does_not_print(capsys):
    made = _synth_count(capsys)
    readme = (REPO / "README.md").read_text()
    shown = [int(n) for n in re.findall(r"\b(\d+) resources\b", readme)]
    assert all(n == made for n in shown), f"README.md names {shown} resources; synth of aws-usw2 prints {made}"
