"""The known-failure knowledge base: message or value -> meaning -> severity -> action.

The knowledge lives in TOML files (parsers/knowledge/*.toml, beside this loader, plus any the user
adds), not in code, so an operator can teach the tool what their fleet says
without a release. Every entry carries its own real examples and counter-examples;
loading checks them, so a broken user entry fails loudly at load time instead of
silently matching nothing (or everything) during an incident.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib  # the standard library's since 3.11, the oldest Python the project takes (pyproject.toml)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from parsers.input.errors import BadInput

#: Where the shipped entries live: this package's data files (pyproject.toml's package-data ships them).
BUILTIN_DIR = Path(__file__).resolve().parent
#: Extra knowledge-base files or folders, separated like PATH.
ENV_VAR = "FORENSICS_KB"

SEVERITIES = ("info", "warning", "error", "critical")
ACTIONS = ("restart-from-checkpoint", "exclude-host-and-restart", "hardware-ticket", "fix-code")
HOST_EFFECTS = ("none", "suspect", "exclude")
#: what an entry's match says of the job, where its action and host effect do not: 'symptom', a line that follows
#: another error (a flushed work request) whose meaning the verdict says, never a cause to act on alone
ROLES = ("symptom",)
KINDS = ("line", "value")
STREAMS = ("kernel", "rank-log")
OPS = (">", ">=", "<", "<=", "==", "!=")

ACTION_TEXT = {
    "restart-from-checkpoint": "restart the job from its last checkpoint",
    "exclude-host-and-restart": "exclude (drain) the host and restart the job without it",
    "hardware-ticket": "open a hardware ticket for the host",
    "fix-code": "fix the code or the job's configuration",
}

_REQUIRED = ("id", "title", "kind", "meaning", "severity", "action", "host", "examples", "counter_examples")


class KnowledgeError(BadInput):
    """A knowledge-base file or entry is malformed; the message names file and entry."""


@dataclass(frozen=True)
class Entry:
    """One piece of knowledge: how to recognise a failure, what it means, what to do."""

    id: str
    title: str
    kind: str  #: 'line' (regex over log lines) or 'value' (comparison on a decoded fact)
    meaning: str
    severity: str
    action: str
    host: str  #: effect on the host verdict: none, suspect, exclude
    origin: str  #: file it came from
    streams: tuple[str, ...] = ("kernel", "rank-log")
    needle: str | None = None
    pattern: re.Pattern | None = None
    key: str | None = None
    op: str | None = None
    value: Any = None
    compare_key: str | None = None
    references: tuple[str, ...] = ()
    examples: tuple[Any, ...] = ()
    counter_examples: tuple[Any, ...] = ()
    example_sources: tuple[str, ...] = ()
    role: str | None = None  #: one of ROLES, or None (its action and host effect say what it is)

    @property
    def is_cause(self) -> bool:
        """A match names a fault to act on: the code's (fix-code) or a host's (a host effect); not a symptom
        every waiting rank prints (a timeout, a closed connection) nor one that follows another error."""
        return self.role is None and (self.action == "fix-code" or self.host != "none")

    @property
    def rank(self) -> int:
        """Severity as a number, for sorting (critical highest)."""
        return SEVERITIES.index(self.severity)

    @property
    def action_text(self) -> str:
        return ACTION_TEXT[self.action]

    def match_line(self, text: str) -> re.Match | None:
        """The regex match of this line entry on one log line, or None."""
        if self.kind != "line" or self.pattern is None:
            return None
        if self.needle and self.needle not in text:
            return None
        return self.pattern.search(text)

    def match_facts(self, facts: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """(fact key, value) pairs of one subject that satisfy this value entry."""
        if self.kind != "value" or self.key is None:
            return []
        hits = []
        for name, actual in facts.items():
            if not fnmatch.fnmatchcase(name, self.key):
                continue
            if self.compare_key is not None:
                if self.compare_key not in facts:
                    continue
                other = facts[self.compare_key]
            else:
                other = self.value
            if _compare(actual, self.op or "==", other):
                hits.append((name, actual))
        return hits


@dataclass
class Finding:
    """One entry matched on one piece of evidence."""

    entry: Entry
    subject: str  #: what it is about: 'kernel', 'gpu 00000000:18:00.0', 'rank 3', 'disk /'
    evidence: str  #: the matching line, or 'key = value'
    source: str = ""  #: file (bundle-relative) it was read from
    line_no: int | None = None
    groups: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.entry.id,
            "title": self.entry.title,
            "severity": self.entry.severity,
            "action": self.entry.action,
            "host_effect": self.entry.host,
            "meaning": self.entry.meaning,
            "subject": self.subject,
            "evidence": self.evidence,
            "source": self.source,
            "line": self.line_no,
            "groups": dict(self.groups),
        }


class KnowledgeBase:
    """All loaded entries, and the matching over lines and facts."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self.entries: list[Entry] = list(entries)
        self._lines = {s: [e for e in self.entries if e.kind == "line" and s in e.streams] for s in STREAMS}
        self._values = [e for e in self.entries if e.kind == "value"]
        self._filters: dict[str, Callable[[str], bool] | None] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def match_line(self, text: str, stream: str = "kernel") -> list[tuple[Entry, re.Match]]:
        """Every line entry for `stream` that matches `text`."""
        found = []
        for entry in self._lines.get(stream, ()):
            m = entry.match_line(text)
            if m:
                found.append((entry, m))
        return found

    def scan_lines(self, lines: Iterable[tuple[int, str]], subject: str, source: str,
                   stream: str = "kernel") -> list[Finding]:
        """Findings over numbered lines (line number, text) of one file."""
        findings = []
        for line_no, text in lines:
            for entry, m in self.match_line(text, stream):
                groups = {k: v for k, v in m.groupdict().items() if v is not None}
                findings.append(Finding(entry, subject, text.strip(), source, line_no, groups))
        return findings

    def line_filter(self, stream: str) -> Callable[[str], bool] | None:
        """A fast test 'could any line entry of `stream` (or of the kernel, for pasted host lines)
        match this line?', for readers to keep just those lines while they read.

        One alternation of every entry's pattern (named groups made plain), so a line costs
        one regex search instead of one per entry; the entries decide afterwards.
        """
        cached = self._filters.get(stream, False)
        if cached is not False:
            return cached
        self._filters[stream] = made = self._make_filter(stream)
        return made

    def _make_filter(self, stream: str) -> Callable[[str], bool] | None:
        patterns = [e.pattern.pattern for s in sorted({stream, "kernel"}) for e in self._lines.get(s, ())
                    if e.pattern is not None]
        if not patterns:
            return None
        plain = [re.sub(r"\(\?P<\w+>", "(?:", p) for p in patterns]
        try:
            combined = re.compile("|".join(f"(?:{p})" for p in plain))
        except re.error:
            return lambda text: bool(self.match_line(text, stream) or self.match_line(text, "kernel"))
        return lambda text: combined.search(text) is not None

    def match_facts(self, subject: str, facts: Mapping[str, Any], source: str = "") -> list[Finding]:
        """Findings of every value entry over the decoded facts of one subject."""
        findings = []
        for entry in self._values:
            for name, actual in entry.match_facts(facts):
                shown = f"{name} = {_show(actual)}"
                if entry.compare_key is not None:
                    shown += f" ({entry.op} {entry.compare_key} = {_show(facts[entry.compare_key])})"
                findings.append(Finding(entry, subject, shown, source))
        return findings


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _compare(actual: Any, op: str, other: Any) -> bool:
    """Compare two fact values; values of kinds that do not compare never match."""
    if isinstance(other, bool) or isinstance(actual, bool):
        if op not in ("==", "!="):
            return False
        same = bool(actual) == bool(other) and isinstance(actual, bool) == isinstance(other, bool)
        return same if op == "==" else not same
    if isinstance(other, (int, float)) and not isinstance(actual, (int, float)):
        return False
    if isinstance(other, str) and not isinstance(actual, str):
        return False
    if op == "==":
        return actual == other
    if op == "!=":
        return actual != other
    try:
        return {">": actual > other, ">=": actual >= other, "<": actual < other, "<=": actual <= other}[op]
    except TypeError:
        return False


def _entry(raw: Any, origin: str, index: int) -> Entry:
    """Validate one raw [[entry]] table and build an Entry; raise KnowledgeError naming it."""
    where = f"{origin}: entry #{index + 1}"
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{where}: expected a table")
    if isinstance(raw.get("id"), str):
        where = f"{origin}: entry {raw['id']!r}"
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise KnowledgeError(f"{where}: missing field(s) {', '.join(missing)}")
    for name, allowed in (("kind", KINDS), ("severity", SEVERITIES), ("action", ACTIONS), ("host", HOST_EFFECTS)):
        if raw[name] not in allowed:
            raise KnowledgeError(f"{where}: {name} {raw[name]!r} is not one of {', '.join(allowed)}")
    for name in ("examples", "counter_examples"):
        if not isinstance(raw[name], list) or (name == "examples" and not raw[name]):
            raise KnowledgeError(f"{where}: {name} must be a list"
                                 + (" with at least one real example" if name == "examples" else ""))
    common = dict(
        id=str(raw["id"]),
        title=str(raw["title"]),
        kind=raw["kind"],
        meaning=str(raw["meaning"]),
        severity=raw["severity"],
        action=raw["action"],
        host=raw["host"],
        origin=origin,
        references=tuple(raw.get("references", ())),
        examples=tuple(raw["examples"]),
        counter_examples=tuple(raw["counter_examples"]),
        example_sources=tuple(raw.get("example_sources", ())),
        role=raw.get("role"),
    )
    if common["role"] is not None and common["role"] not in ROLES:
        raise KnowledgeError(f"{where}: role {common['role']!r} is not one of {', '.join(ROLES)}")
    if raw["kind"] == "line":
        entry = _line_entry(raw, where, common)
    else:
        entry = _value_entry(raw, where, common)
    _check_examples(entry, where)
    return entry


def _line_entry(raw: dict, where: str, common: dict) -> Entry:
    if not isinstance(raw.get("pattern"), str):
        raise KnowledgeError(f"{where}: a line entry needs a 'pattern' (a Python regular expression)")
    try:
        pattern = re.compile(raw["pattern"])
    except re.error as err:
        raise KnowledgeError(f"{where}: bad pattern: {err}") from err
    streams = tuple(raw.get("streams", STREAMS))
    bad = [s for s in streams if s not in STREAMS]
    if bad:
        raise KnowledgeError(f"{where}: unknown stream(s) {', '.join(bad)}; use {', '.join(STREAMS)}")
    if any(not isinstance(x, str) for x in common["examples"] + common["counter_examples"]):
        raise KnowledgeError(f"{where}: examples of a line entry must be strings (log lines)")
    return Entry(**common, streams=streams, needle=raw.get("needle"), pattern=pattern)


def _value_entry(raw: dict, where: str, common: dict) -> Entry:
    if not isinstance(raw.get("key"), str):
        raise KnowledgeError(f"{where}: a value entry needs a 'key' (fact name, wildcards allowed)")
    if raw.get("op") not in OPS:
        raise KnowledgeError(f"{where}: op {raw.get('op')!r} is not one of {' '.join(OPS)}")
    if ("value" in raw) == ("compare_key" in raw):
        raise KnowledgeError(f"{where}: give exactly one of 'value' or 'compare_key'")
    if any(not isinstance(x, dict) for x in common["examples"] + common["counter_examples"]):
        raise KnowledgeError(f"{where}: examples of a value entry must be tables of facts")
    return Entry(**common, key=raw["key"], op=raw["op"], value=raw.get("value"), compare_key=raw.get("compare_key"))


def _check_examples(entry: Entry, where: str) -> None:
    """Every example must match and every counter-example must not: the entry's own test."""
    for example in entry.examples:
        if not _matches(entry, example):
            raise KnowledgeError(f"{where}: example does not match: {example!r}")
    for counter in entry.counter_examples:
        if _matches(entry, counter):
            raise KnowledgeError(f"{where}: counter-example matches: {counter!r}")


def _matches(entry: Entry, example: Any) -> bool:
    if entry.kind == "line":
        return entry.match_line(example) is not None
    return bool(entry.match_facts(example))


def load_file(path: Path) -> list[Entry]:
    """Entries of one TOML file, validated."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise KnowledgeError(f"{path}: cannot read: {err}") from err
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise KnowledgeError(f"{path}: not valid TOML: {err}") from err
    raw = data.get("entry", [])
    if not isinstance(raw, list) or not raw:
        raise KnowledgeError(f"{path}: no [[entry]] tables")
    return [_entry(item, str(path), i) for i, item in enumerate(raw)]


def _files(location: Path) -> list[Path]:
    location = Path(location)
    if location.is_dir():
        return sorted(location.glob("*.toml"))
    if location.exists():
        return [location]
    raise KnowledgeError(f"{location}: no such knowledge-base file or folder")


def load(extra: Iterable[str | Path] = (), use_env: bool = True, builtin: bool = True) -> KnowledgeBase:
    """The shipped entries, then those of $FORENSICS_KB, then `extra`; later ids replace earlier."""
    locations: list[Path] = [BUILTIN_DIR] if builtin else []
    if use_env and os.environ.get(ENV_VAR):
        locations += [Path(p) for p in os.environ[ENV_VAR].split(os.pathsep) if p]
    locations += [Path(p) for p in extra]
    by_id: dict[str, Entry] = {}
    for location in locations:
        seen_here: dict[str, str] = {}
        for path in _files(location):
            for entry in load_file(path):
                if entry.id in seen_here:
                    raise KnowledgeError(f"{path}: entry {entry.id!r} is also defined in {seen_here[entry.id]}")
                seen_here[entry.id] = str(path)
                by_id[entry.id] = entry
    return KnowledgeBase(by_id.values())
