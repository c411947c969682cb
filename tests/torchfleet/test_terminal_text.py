"""What a job or a researcher writes reaches the CLI user's terminal escaped (hostile review: an OSC 52
clipboard write and a screen clear in `checkpoints`' VERIFIED column, `status` events, `logs` events)."""

from __future__ import annotations

from torchfleet.jobs import log_lines, results, table, terminal_text
from torchfleet.jobs.summary import EVENT_PREFIX

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
CLEAR = "\x1b[2J"


def _no_control_characters(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text)


def test_printable_escapes_every_control_character_but_newlines():
    assert terminal_text.printable(f"a{OSC52}b\nc") == "a\\x1b]52;c;ZWNobyBwd25lZA==\\x07b\nc"
    assert terminal_text.cell("a\nb\rc") == "a\\nb\\rc"


def test_checkpoints_verified_column_escapes_a_hostile_meta_json_file_name():
    listing = {"checkpoints": [{"name": f"step-1{CLEAR}", "step": 1, "generation": 0, "bytes": 10,
                                "created": 0.0, "verified": False, "problem": f"{OSC52}{CLEAR}: missing"}]}
    out = results.render(listing, now=10.0)
    _no_control_characters(out)
    assert "\\x1b]52;c;" in out


def test_status_tables_escape_event_messages_and_cells():
    out = table.render(("A", "MESSAGE"), [("1", f"pulled {OSC52}image\nsecond line")])
    _no_control_characters(out)
    assert len(out.splitlines()) == 2  # a cell never breaks the table's lines


def test_logs_event_lines_escape_the_jobs_fields():
    raw = EVENT_PREFIX + '{"ev": "exit", "wall": 1.0, "step": 3, "code": 1, "reason": "' + \
        OSC52.replace("\x1b", "\\u001b").replace("\x07", "\\u0007") + '"}'
    line = log_lines.Readable().line(raw)
    assert line is not None and "\\x1b]52" in line
    _no_control_characters(line)

