"""Text from the cluster or the store made safe to print on the user's terminal.

Whatever a job writes (file names in its folder, its events, its `meta.json`) and whatever a researcher can
put in an object (an image name, an event message) is hostile input to whoever runs the CLI on it: an OSC 52
sequence writes the terminal's clipboard, CSI sequences clear or redraw the screen (docs/threat-model.md,
"A job -> the machine that runs the CLI"). Every command that prints such text passes it through here.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every control character escaped as Python writes it (``\\x1b``), newlines kept."""
    return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)


def cell(text: object) -> str:
    """One table cell or one-line field: control characters and newlines escaped."""
    return printable(str(text)).replace("\n", "\\n")
