"""Runtime output pasted into an agent's message, recognized by its structure (issue 17, defect 2).

Agents paste what a program printed into their messages: tracebacks, stack frames, log lines,
an execution report ("exitcode: 1 (execution failed)") with the output under it, warnings about
library paths and versions. Those lines are what the runtime said, not what the agent asserts: a
path under ``site-packages``, a version date in a "model mismatch" warning or a logger's timestamp
is not a claim, and a value the agent later quotes from them is supported by them.

:func:`runtime_spans` finds such lines by their form only (no program, framework or tool name):

- a Python traceback: ``Traceback (most recent call last):`` and the indented lines under it, up to
  and including the exception line (``SomeError: ...``);
- stack frames: ``File "...", line N``, ``at pkg.Class.method(File.java:12)``, ``at fn (file.js:1:2)``;
- log lines: a line opening with a timestamp (``2024-12-19 12:37:12``), a level (``INFO:``,
  ``WARNING ``, ``[ERROR]``), a one-letter glog level with a date (``I1219 12:37:12``), a bracketed
  logger prefix followed by a level (``[client: 12-02 01:00:00] WARNING - ...``), or a
  ``...Warning:`` category;
- an execution report: ``exit code 1`` / ``exitcode: 1 (...)`` and the output lines under it up to
  the next blank line;
- any line holding a path under an interpreter or library prefix (``site-packages/``,
  ``dist-packages/``, ``/usr/lib/python3``, ``/lib/python3.``, ``node_modules/``);
- a termination marker: a line that is one upper-case token (``TERMINATE``, ``SCENARIO.PY``).

Linear in the text's length; never raises.
"""

from __future__ import annotations

import re

from trajaudit.engine.dsl.regex.stored import module_pattern

_TRACEBACK = module_pattern(r"^[ \t]*Traceback \(most recent call last\):[ \t]*$", re.M)
_EXC_LINE = module_pattern(r"^[ \t]*(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt|Warning|Fault)\b[^\n]*$")
_LINE_PATTERNS = module_pattern(
    r"^[ \t]*(?:"
    r"File \"[^\"\n]*\", line \d+"  # Python frame
    r"|at [\w.$<>]+\([^)\n]*:\d+\)"  # Java frame
    r"|at [^\n(]*\([^)\n]*:\d+:\d+\)"  # JavaScript frame
    r"|\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}"  # timestamped log line
    r"|\[?(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\]?[:\s]"  # logger level
    r"|[IWEF]\d{4} \d{2}:\d{2}:\d{2}"  # glog
    r"|\[[^\]\n]{1,80}\][^\n]{0,200}?\b(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b"  # [logger: stamp] ... LEVEL
    r"|[A-Z]\w*Warning:"  # a warning category
    r"|exit ?code:? ?-?\d+"  # an execution report
    r"|[A-Z][A-Z0-9_]*(?:\.[A-Z0-9]{1,5})?[.!]?[ \t]*$"  # a termination marker alone on its line
    r")",
    re.M,
)
_LIB_PATH = module_pattern(r"site-packages/|dist-packages/|/usr/lib/python\d|/lib/python\d\.|node_modules/")
_REPORT = module_pattern(r"^[ \t]*exit ?code:? ?-?\d+", re.I)


#: The three tests a line gets at its start, in the order the reference loop tries them, as one
#: pattern: the first branch that matches names the test (``lastgroup``) — one call per line.
_LINE_START = module_pattern(
    rf"(?P<tb>{_TRACEBACK.pattern})|(?P<rep>(?i:{_REPORT.pattern.removeprefix('^')}))|(?P<line>{_LINE_PATTERNS.pattern})",
    re.M,
)


def runtime_spans(text: str) -> list[tuple[int, int]]:
    """Sorted, disjoint ``(start, end)`` character spans of ``text`` that are pasted runtime output
    (see the module docstring). Empty for text without any.

    Equal to :func:`runtime_spans_reference` (the line loop with one test per call), with two
    exact shortcuts: the three line-start tests are one pattern (:data:`_LINE_START`, its branches
    in the reference's order), and the library-path test runs on each line only when the whole text
    holds such a path (a line's match is a match in the text)."""
    if not text:
        return []
    spans: list[tuple[int, int]] = []
    lines = text.split("\n")
    lib = _LIB_PATH.search(text) is not None
    start = _LINE_START.match
    i, n, a = 0, len(lines), 0
    while i < n:
        ln = lines[i]
        hit = start(ln)
        group = hit.lastgroup if hit is not None else None
        if group == "tb" or group == "rep":
            j = _block_end(lines, i, group == "tb")
            end = a + sum(len(x) + 1 for x in lines[i:j - 1]) + len(lines[j - 1])
            spans.append((a, end))
            a = end + 1
            i = j
            continue
        if (group == "line" or (lib and _LIB_PATH.search(ln))) and ln.strip():
            spans.append((a, a + len(ln)))
        a += len(ln) + 1
        i += 1
    return _merge(spans)


def _block_end(lines: list[str], i: int, traceback: bool) -> int:
    """The line after the block opening at line ``i``: a traceback's indented lines and its exception
    line, or an execution report's output up to a blank line (as :func:`runtime_spans_reference`)."""
    n = len(lines)
    j = i + 1
    if traceback:
        while j < n and (lines[j][:1] in (" ", "\t") or not lines[j].strip()) and lines[j].strip() != "":
            j += 1
        if j < n and _EXC_LINE.match(lines[j]):
            j += 1
        return j
    while j < n and lines[j].strip() and not lines[j].lstrip().startswith("#"):
        j += 1
    return j


def runtime_spans_reference(text: str) -> list[tuple[int, int]]:
    """The definition of :func:`runtime_spans` (kept for the equivalence test)."""
    if not text:
        return []
    spans: list[tuple[int, int]] = []
    lines = text.split("\n")
    pos = 0
    starts = []
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    i = 0
    n = len(lines)
    while i < n:
        ln = lines[i]
        a = starts[i]
        if _TRACEBACK.match(ln):
            j = i + 1
            while j < n and (lines[j][:1] in (" ", "\t") or not lines[j].strip()) and lines[j].strip() != "":
                j += 1
            if j < n and _EXC_LINE.match(lines[j]):
                j += 1
            spans.append((a, starts[j - 1] + len(lines[j - 1])))
            i = j
            continue
        if _REPORT.match(ln):  # the report and the output under it, up to a blank line
            j = i + 1
            while j < n and lines[j].strip() and not lines[j].lstrip().startswith("#"):
                j += 1
            spans.append((a, starts[j - 1] + len(lines[j - 1])))
            i = j
            continue
        if (_LINE_PATTERNS.match(ln) or _LIB_PATH.search(ln)) and ln.strip():
            spans.append((a, a + len(ln)))
        i += 1
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
