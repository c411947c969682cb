"""The worker's own exception, out of a node's (or pod's) log (issue 32).

A worker started with ``--run_path`` (the launcher's forkserver, every ``.py`` script) does not print its
traceback itself: torchrun's agent reports it, each line behind the glog prefix of torch's own log
(``E1128 16:32:13.829000 20861 torch/distributed/elastic/multiprocessing/api.py:836] ``), after
"-- Process 0 terminated with the following error:" and torch's own frames
(torch/distributed/elastic/multiprocessing/api.py, ``_poll``/``ProcessRaisedException``). The end of the
log, with torch's lines dropped, was then empty. A worker started otherwise prints a plain traceback.
Either way this finds the last one and keeps the frames that are not torch's or runpy's.
"""

from __future__ import annotations

import re

# torch's glog-style prefix on the agent's report of a failed worker
_REPORT_PREFIX = re.compile(r"^[EWIF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)? +\d+ \S*multiprocessing/api\.py:\d+\] ?")
_PROCESS_ERROR = "terminated with the following error:"
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "([^"]+)", line \d+')
_NOT_THE_USERS = re.compile(r"/torch/|<frozen |/runpy\.py")


def strip_report_prefix(line: str) -> str:
    """The agent's report line without torch's log prefix (the worker's own words)."""
    return _REPORT_PREFIX.sub("", line)


def last_worker_error(log: str) -> list[str]:
    """The last worker traceback in ``log`` (torch's and runpy's frames dropped), or []."""
    lines = log.splitlines()
    reported = [i for i, line in enumerate(lines) if _REPORT_PREFIX.match(line) and _PROCESS_ERROR in line]
    if reported:
        body = []
        for line in lines[reported[-1] + 1:]:
            if not _REPORT_PREFIX.match(line) or "failed (exitcode:" in line:
                break
            body.append(strip_report_prefix(line))
        return _users_frames(body)
    plain = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if not plain:
        return []
    body = [lines[plain[-1]]]
    for line in lines[plain[-1] + 1:]:
        body.append(line)
        if line and not line[0].isspace():  # the exception line ends it
            break
    return _users_frames(body)


def _users_frames(body: list[str]) -> list[str]:
    """Drop each frame (its File line and the source lines under it) inside torch or runpy."""
    kept: list[str] = []
    skipping = False
    for line in body:
        frame = _FRAME.match(line)
        if frame:
            skipping = bool(_NOT_THE_USERS.search(frame.group(1)))
        elif line and not line[0].isspace():
            skipping = False  # "Traceback ...", the exception line
        if not skipping:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def summary(log: str) -> str | None:
    """One line: the exception and where the user's code raised it, or None."""
    error = last_worker_error(log)
    if not error:
        return None
    where = [m for m in (_FRAME.match(line) for line in error) if m]
    at = f" ({where[-1].group(0).strip()})" if where else ""
    return error[-1].strip() + at
