"""The processes a file names in an exit, an exception or an error of their own, and where those processes are.

Why one place: digest first reads raw the processes such a file names (`parsers.scale.digest_first`), and the focus
reads the hosts of the same processes (`parsers.scale.focus`). Each picked them in its own code: digest first took a
launcher exit's pid on every host and a faulty file's own process, the focus a launcher exit's or an error's rank,
else its host and pid, else its pid on at most 8 hosts, and never the file's own process. A launcher record, a
traceback or an error added to one was not read by the other, so a rank the full read names at 8 ranks could be
judged from its class at 100,000. Both now ask `named` what a file names and `Claims.processes` which processes
of the manifest that is (by rank, as the judges match an exit or an exception to its rank; by host and pid; by a
pid alone only where nothing else is said, on at most MAX_SAME_PID hosts: pids repeat across hosts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from parsers.judges.exceptions import exception_rank
from parsers.model.events import own_faults

#: hosts whose process has one pid read for a name that gives the pid alone (pids repeat from host to host)
MAX_SAME_PID = 8


@dataclass(frozen=True)
class NamedProcess:
    """A process a file names: by its rank, its host and pid, or only some of these."""

    rank: int | None
    host: str | None
    pid: int | None
    what: str  #: 'exit' (a launcher record), 'exception', 'error', or 'file' (the faulty file's own process)


def named(art: Any) -> Iterator[NamedProcess]:
    """What one file (an `Artifact`: its `Parsed` and the hints it was filed under) names: each launcher exit,
    each exception (by the rank the exceptions judge gives it: `exception_rank`), each error of a process's own
    (`own_faults`: by its origin), and, where it holds such a fault, the process the file belongs to (a child's
    files belong to their rank's process)."""
    parsed = art.parsed
    if parsed is None:
        return
    for n, _ in exits_named(parsed.exits):
        yield n
    faulty = False
    for flag, x in own_faults(parsed):
        faulty = True
        if flag == "exception":
            yield NamedProcess(exception_rank(x, art), None, None, flag)
        else:
            o = x.origin
            yield NamedProcess(_int(o.rank), o.host, _int(o.pid), flag)
    hints = art.hints
    if faulty and (hints.pid is not None or art.rank is not None):
        pid = hints.parent_pid if hints.parent_pid is not None else hints.pid
        yield NamedProcess(art.rank, hints.host, pid, "file")


def exits_named(exits: Iterable[Any]) -> Iterator[tuple[NamedProcess, Any]]:
    """Each launcher exit (`parsers.readers.launcher.RankExit`) with the process it names: its rank, host and pid."""
    for x in exits:
        rank, pid = _int(getattr(x, "rank", None)), _int(getattr(x, "pid", None))
        yield NamedProcess(rank, getattr(x, "host", None), pid, "exit"), x


class Claims:
    """The manifest's processes, by the rank each claims and by pid: where a `NamedProcess` process is."""

    def __init__(self, records: Iterable[Any]):
        self.by_rank: dict[int, list[tuple[str, int]]] = {}
        self.by_pid: dict[int, list[tuple[str, int]]] = {}
        self.known: set[tuple[str, int]] = set()
        for r in records:
            key = (r.host, r.pid)
            self.known.add(key)
            if r.rank is not None:
                self.by_rank.setdefault(r.rank, []).append(key)
            self.by_pid.setdefault(r.pid, []).append(key)

    def processes(self, n: NamedProcess) -> list[tuple[str, int | None]]:
        """(host, pid) of each process `n` names: every process that claims its rank, and the process at its host
        and pid (pid None where the manifest has no such process: its host is still named); by its pid alone
        (at most MAX_SAME_PID) only where it says neither a claimed rank nor a host."""
        out: list[tuple[str, int | None]] = list(self.by_rank.get(n.rank, ())) if n.rank is not None else []
        if n.host is not None and n.pid is not None:
            out.append((n.host, n.pid) if (n.host, n.pid) in self.known else (n.host, None))
        elif not out and n.pid is not None and n.host is None:
            out += self.by_pid.get(n.pid, ())[:MAX_SAME_PID]
        return list(dict.fromkeys(out))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
