"""What the Flight Recorder analyzer's report supports, and no more.

The analyzer (`fr_trace` / `torchfrtrace`) already matched every rank's dump; its findings
arrive as `fr-analysis` events (parsers/readers/fr_report.py). Two of them can name ranks:

- `missing ranks`: ranks whose dumps lack a collective the others scheduled. When they are a
  strict minority of the group (and their dumps were read: the analyzer did not say it missed
  them), the others wait for them: they are named (FR_MISSING, 0.6). A lone missing rank of a
  two-rank group is named too, a little lower (0.55): no minority exists there, but the pair is
  not symmetric, one rank recorded the collective and the other did not. A majority missing
  says as much about the few that ran ahead as about the many: nobody is named. And a missing
  rank that itself scheduled another group's collective that some rank never recorded waits
  there: it is a link of a wait chain, not its end, and is not named (our NCCL 'chain' capture:
  ranks 1 and 2 are missing from pg_A and pg_B because they wait in pg_B and pg_C; rank 3, which
  waits nowhere, sleeps).
- `Culprit rank R; Error type: T`: R differs from the reference rank the analyzer compared
  against (its own comment: when the reference rank is itself the odd one, most ranks get
  listed). Only a small minority (at most MAX_CULPRIT_SHARE of the world, the list complete)
  is named, as mismatch leads (FR_CULPRIT, 0.5). A state mismatch is never a lead: a rank that
  'completed' where the reference is 'scheduled' got further than the reference, not stuck.

Everything else is said in the summary (`describe`), never judged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, cast

from parsers.model.events import ErrorEvent, ErrorKind, FrCulprit, FrFinding
from parsers.model.findings import FrReportFact, ReasonClass, of_rank
from parsers.model.majority import strict_minority
from parsers.model.ranges import fold

KIND = ErrorKind.FR_ANALYSIS
MAX_CULPRIT_SHARE = 0.25  #: a 'Culprit rank' list longer than this share of the world is the reference's oddity
PAIR_CONFIDENCE = 0.55  #: the lone missing rank of a two-rank group
#: error types that say the listed rank called something else; a state mismatch says it got further
_CALL_MISMATCHES = {"SIZE_OR_SYNTAX_MISMATCH", "COLLECTIVE_TYPE_MISMATCH", "COLLECTIVE_DTYPE_MISMATCH",
                    "COLLECTIVE_PG_MISMATCH", "COLLECTIVE_SEQ_MISMATCH"}


def _of(e: ErrorEvent) -> FrFinding:
    """An fr-analysis event's typed data (ErrorEvent makes it an FrFinding for that kind, whoever built it)."""
    return cast(FrFinding, e.data)


def undecided(events: Iterable[ErrorEvent]) -> dict[int, int]:
    """rank -> how many collectives the analyzer could not decide because it had no dump of that rank
    ('We cannot decide what's wrong with this collective entry because we missed FR dumps from ranks ({1})')."""
    out: dict[int, int] = {}
    for e in events:
        if type(e) is ErrorEvent and e.kind == KIND:
            for r in _of(e).no_dump_ranks or ():
                out[r] = out.get(r, 0) + 1
    return out


def findings(events: Iterable[tuple[int | None, ErrorEvent]] | Iterable[ErrorEvent]) -> list[ErrorEvent]:
    """The analyzer's findings among (rank, event) pairs or plain events."""
    out = []
    for item in events:
        e = item[1] if isinstance(item, tuple) else item
        if type(e) is ErrorEvent and e.kind == KIND and _of(e).finding in ("not-joined", "errors", "io-mismatch"):
            out.append(e)
    return out


def where(op: str | None, seq: int | None, group: str | None) -> str:
    """'ALLREDUCE collective sequence number 11 of group default_pg': the collective a finding is about."""
    seq_words = f" collective sequence number {seq}" if seq is not None else ""
    return f"{(op or 'a collective').upper()}{seq_words} of group {group or 'an unnamed group'}"


def _group(e: ErrorEvent) -> str | None:
    return _of(e).pg_desc or (e.comm or "").removeprefix("pg:") or None


def _where(e: ErrorEvent) -> str:
    return where(e.op, e.seq, _group(e))


def _group_size(e: ErrorEvent) -> int | None:
    d = _of(e)
    return d.expected_count or (len(d.expected_ranks) if d.expected_ranks else None)


def _named_missing(e: ErrorEvent) -> tuple[list[int], float, int] | None:
    """The missing ranks the report supports naming, at what confidence, and the size of their group; None
    when it names nobody."""
    d = _of(e)
    missing = [r for r in d.missing_ranks or [] if r not in set(d.no_dump_ranks or [])]
    size = _group_size(e)
    if d.finding != "not-joined" or not missing or not size:
        return None
    conf = _missing_confidence(len(missing), size)
    return (missing, conf, size) if conf is not None else None


def _missing_confidence(n_missing: int, size: int | None) -> float | None:
    """How far `n_missing` ranks missing from a group of `size` support naming them: a strict minority,
    or the lone missing rank of a pair; None otherwise (a majority says as much of those that ran ahead)."""
    if strict_minority(n_missing, size or 0):
        return ReasonClass.FR_MISSING.default_confidence
    return PAIR_CONFIDENCE if (n_missing, size) == (1, 2) else None


def _named_culprits(e: ErrorEvent) -> list[FrCulprit] | None:
    """The 'Culprit rank' entries the report supports naming (a small, complete minority of call mismatches)."""
    d = _of(e)
    world = d.world_size or _group_size(e)
    culprits = d.culprits or []
    if not culprits or not d.culprits_complete or not world:
        return None
    if len({c.rank for c in culprits}) > MAX_CULPRIT_SHARE * world:
        return None
    calls = [c for c in culprits if c.error_type in _CALL_MISMATCHES]
    return calls or None


def waiting_ranks(found: list[ErrorEvent]) -> set[int]:
    """Ranks that scheduled a collective some other rank never recorded: each waits in that group.

    Why: a rank missing from one group's collective may be missing because it waits in another
    group's (our chain capture, NCCL 2.28.9: rank 1 is missing from pg_B because it waits in pg_C
    on rank 3, the one that sleeps). Only a missing rank that waits nowhere ends the chain."""
    out: set[int] = set()
    for e in found:
        d = _of(e)
        missing = set(d.missing_ranks or [])
        if d.finding == "not-joined" and missing and d.expected_ranks:
            out |= set(d.expected_ranks) - missing - set(d.no_dump_ranks or [])
    return out


def offer_suspects(errors: Iterable[tuple[int | None, ErrorEvent]], get: Callable) -> None:
    """Suspects from the analyzer's findings (see the module docstring); `get(rank)` gives the accumulator."""
    found = findings(errors)
    waiting = waiting_ranks(found)
    for e in found:
        where = _where(e)
        cite = f"Flight Recorder analyzer: {e.message}" + (f" [{e.origin.file}:{e.origin.line}]" if e.origin.file
                                                           else "")
        named = _named_missing(e)
        if named is not None:
            ranks, conf, size = named
            chain = (f"; ranks {fold(sorted(waiting))} each wait for a rank that never recorded their "
                     "collective") if waiting else ""
            for r in ranks:
                if r in waiting:  # missing here because it waits elsewhere: a link of the chain, not its end
                    continue
                get(r).offer(ReasonClass.FR_MISSING, of_rank(r, f"never recorded {where}, which the other "
                             f"{size - len(ranks)} rank(s) of the group scheduled (the Flight Recorder analyzer's "
                             f"missing ranks: {fold(ranks)}, of a group of {size}){chain}"), conf, [cite])
            continue
        for c in _named_culprits(e) or ():
            get(c.rank).offer(ReasonClass.FR_CULPRIT, of_rank(c.rank, f"differs in {where} from the rank the "
                                 f"Flight Recorder analyzer compared against ({c.error_type}; "
                                 f"{len(_of(e).culprits or ())} of {_of(e).world_size or _group_size(e)} ranks "
                                 "listed)"),
                                 ReasonClass.FR_CULPRIT.default_confidence, [cite])


def facts(events: Iterable[ErrorEvent], limit: int = 3) -> list[FrReportFact]:
    """What the analyzer's findings show, one fact each, for a summary that names no culprit (worded by
    forensics/report/words/facts.py)."""
    events = list(events)
    out = []
    for e in findings(events)[:limit]:
        d = _of(e)
        at = FrReportFact("errors", op=e.op, seq=e.seq, group=_group(e), size=_group_size(e), state=d.state or None)
        if d.finding == "not-joined":
            missing = tuple(d.missing_ranks or ())
            minority = not (missing and at.size and _missing_confidence(len(missing), at.size) is None)
            out.append(replace(at, role="not-joined", ranks=missing, minority=minority,
                               no_dump=tuple(d.no_dump_ranks or ())))
        elif d.culprits:
            culprits = d.culprits
            out.append(replace(at, role="culprits", ranks=tuple(c.rank for c in culprits),
                               kinds=tuple(sorted({c.error_type for c in culprits})),
                               complete=bool(d.culprits_complete)))
        else:
            out.append(at)
    for r, n in sorted(undecided(events).items())[:limit]:
        out.append(FrReportFact("undecided", (r,), count=n))
    for e in events:
        if type(e) is ErrorEvent and e.kind == KIND and _of(e).finding == "gave-up":
            out.append(FrReportFact("gave-up", group=_of(e).pg_desc or "?"))
            break
    return out
