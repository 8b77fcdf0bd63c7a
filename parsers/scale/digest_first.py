"""Read a bundle digest first: the evidence rebuilt from its hosts' digests, raw files only where it matters.

Why: a bundle of 100,000 ranks has 600,000 raw files; its 12,500 host digests hold the same typed
evidence, bounded (`parsers.scale.digest`). The raw files stay in the bundle and are read for the odd ones out:
chosen over the classes of the hosts' merged digest (`parsers.scale.classes`: each class judged once,
whatever its rank count), or, when a host with files has no usable digest or the merge cut something to its
caps, by the same rules over every rank's summary gathered from the rebuilt evidence (`_odd_by_ranks`); for the
hosts a host finding names, for files no usable digest covers, and, after a first verdict, for any rank it names
that was not read raw yet (`DigestRead.reread`): the verdict rests on raw files for every rank it names.

A digest is used only when it is the one for this reading: made with the knowledge base the analysis
uses (its notes depend on it), for the default log mode. A host re-filed under another name (the fleet's
merge) keeps its digest usable: what came from the file's hint is rebuilt as the name it is filed under.
Anything else (and a digest that fails its checks) is said in `DigestRead.notes`, and that host's
raw files are read instead.

The host's side is here too (`digest_host`, `encode_files`: which files a digest holds, by the registry's kinds):
it runs the readers and the judges, which a reader of digests (parsers.scale.digest: the format, the checks, the
rank summaries a merge reads) never imports.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from parsers.scale.digest import (DIGEST_NAME, HOST_TOKEN, MAX_STR, NOTES_CAP, DigestError, HostDigest, StatedJob,
                                  decode_parsed, encode_parsed, kb_key, make_digest, read_digest, summaries_of)
from parsers.scale.classes import ClassJudgement, judge_classes
from parsers.scale.named_faults import Claims, named
from parsers.scale.merge import ClassSummary, from_host, merge_all, ranks_of
from parsers.model.summaries import HostFinding, gathered
from parsers.gather import registry
from parsers.gather.evidence import PARALLEL_FILES, Artifact, Evidence, assemble, read_files
from parsers.gather.source import FileRef, Source
from parsers.judges.hosts import judge_hosts, kernel_event_lines

#: a verdict that names more ranks than this is not re-read rank by rank (it reads them all raw then)
MAX_REREAD = 4096


def digest_host(source: Source, host: str, kb: Any, created: str = "", refs: list[FileRef] | None = None,
                manifest: Any = None) -> dict[str, Any]:
    """The digest document of one host of a bundle: its files read by the readers, as analysis reads them.

    `collect` calls this on its own bundle (one host); a test calls it on any fixture bundle. `refs`: the
    host's files, and `manifest` the host's part of the manifest, when the caller has them grouped already
    (a benchmark of thousands of hosts)."""

    rec = next((h for h in source.manifest.hosts if h.host == host), None) if source.manifest else None
    if rec is None:
        raise DigestError(f"host {host!r} is not in the bundle's manifest")
    host_dir = (rec.dir or f"hosts/{host}").rstrip("/")
    if refs is None:
        refs = [f for f in source.files if f.rel.startswith(host_dir + "/")]
    # read under HOST_TOKEN: what came from the hint, not the content, is told apart (see HOST_TOKEN)
    read = read_files([FileRef(r.path, r.rel, dataclasses.replace(r.hints, host=HOST_TOKEN)) for r in refs],
                      kb.line_filter)
    files = encode_files(read, host_dir, lambda art: judged_lines(kb, art))
    # the summaries and host findings are made from the digest itself, as analysis will rebuild it
    arts = [_rebuilt(ref, files.get(ref.rel[len(host_dir) + 1:]), host) or dataclasses.replace(art, hints=ref.hints)
            for ref, art in zip(refs, read)]
    # the host's own part of the manifest: a job bundle's other ranks are not this host's (and would cost
    # O(ranks) a host: quadratic over a fleet's job bundle)
    own = manifest if manifest is not None else dataclasses.replace(
        source.manifest, hosts=[rec], ranks=[r for r in source.manifest.ranks if r.host == host],
        missing=[m for m in source.manifest.missing if m.host == host])
    sub = Source(root=source.root, given=source.given, form=source.form, manifest=own, files=refs)
    ev = assemble(sub, arts)
    _, suspects = judge_hosts(ev, kb)
    findings = [{"rank": s.rank, "host": s.host, "reason_class": str(s.reason_class), "reason": (s.reason or "")[:500]}
                for s in suspects][:256]
    return make_digest(host, host_dir, files, ev, findings, kb_key(kb), created)


def encode_files(arts: Iterable[Any], host_dir: str, matched: Callable[[Any], frozenset[int]] | None = None
                 ) -> dict[str, Any]:
    """Each rank-scope and host-scope artifact under `host_dir`, read under HOST_TOKEN: its `Parsed`,
    bounded, by its path under `host_dir` (a file the model cannot hold is left out: read raw). `matched(art)`:
    the line numbers of its notes to keep past the cap (those the knowledge base matches)."""
    files: dict[str, Any] = {}
    prefix = host_dir.rstrip("/") + "/"
    for art in arts:
        rel = art.rel or ""
        if not rel.startswith(prefix) or not _digestible(art.kind):
            continue
        entry: dict[str, Any] = {"kind": art.kind}
        if art.error:
            entry["error"] = art.error[:MAX_STR]
        if art.parsed is not None:
            try:
                keep = matched(art) if matched is not None and len(art.parsed.notes) > NOTES_CAP else frozenset()
                entry["parsed"] = encode_parsed(art.parsed, str(art.path), rel, keep)
            except DigestError:
                continue  # a foreign value in the model: this file is read raw
        files[rel[len(prefix):]] = entry
    return files


def _digestible(kind: str) -> bool:
    """Rank- and host-scope kinds the readers read (job-level files and the recognised-but-skipped stay raw)."""
    k = registry.BY_NAME.get(kind)
    return k is not None and k.scope in (registry.RANK, registry.HOST) or kind in ("empty", "unreadable", "binary")


def judged_lines(kb: Any, art: Artifact) -> frozenset[int]:
    """The lines of `art`'s kept notes that the knowledge base matches, as a host's kernel log or a rank's log
    (the two ways the host judge scans notes), and a kernel log's lines read as error events (each set against
    the job's start: parsers.judges.hosts.kernel_events): the digest keeps them past its cap, so its verdict is
    the full read's on a long log too."""
    notes = art.parsed.notes if art.parsed else []
    return frozenset([f.line_no for stream in ("kernel", "rank-log")
                      for f in kb.scan_lines(notes, "", art.rel or "", stream) if f.line_no is not None]
                     + [k.line for k in kernel_event_lines(art)])


def _rebuilt(ref: FileRef, entry: dict | None, host: str | None) -> Artifact | None:
    """The artifact of `ref` rebuilt from its digest entry (None without one); DigestError on a bad entry."""
    if entry is None:
        return None
    parsed = decode_parsed(entry["parsed"], str(ref.path), ref.rel, host) if "parsed" in entry else None
    return Artifact(ref.path, entry["kind"], ref.hints, parsed, entry.get("error"), ref.rel)


def _key(ref: FileRef) -> tuple[str | None, int | None]:
    """The process a file belongs to (a child's files belong to its rank), or (host, None) for a host file."""
    h = ref.hints
    return h.host, (h.parent_pid if h.parent_pid is not None else h.pid)


@dataclass
class DigestRead:
    """A source read digest first: its evidence, and what was read how."""

    source: Source
    line_filter: Any
    evidence: Evidence | None = None
    arts: list[Artifact] = field(default_factory=list)  #: in the source's file order
    from_digest: list[bool] = field(default_factory=list)  #: per artifact: rebuilt from a digest (not read raw)
    hosts_used: int = 0
    notes: list[str] = field(default_factory=list)
    raw_processes: set = field(default_factory=set)  #: (host, pid) read raw
    reread: int = 0  #: ranks read raw after the first verdict named them
    merged: ClassSummary | None = None  #: the hosts' digests merged (parsers.scale.merge), judged over classes
    classes: ClassJudgement | None = None

    def read_raw(self, processes: Iterable[tuple[str, int]], hosts: Iterable[str] = ()) -> int:
        """Replace the digest's artifacts of these processes (and host files of these hosts) by raw reads;
        returns how many files were read. The evidence is assembled again when any was."""
        procs, hs = set(processes), set(hosts)
        todo = [i for i, a in enumerate(self.arts) if self.from_digest[i]
                and (_key(self.source.files[i]) in procs or (self.source.files[i].hints.pid is None
                                                            and self.source.files[i].hints.host in hs))]
        self.raw_processes |= procs
        if not todo:
            return 0
        refs = [self.source.files[i] for i in todo]
        for i, art in zip(todo, read_files(refs, self.line_filter, _workers(len(refs)))):
            self.arts[i], self.from_digest[i] = art, False
        self.assemble()
        return len(todo)

    def assemble(self) -> None:
        """The evidence of the artifacts as they stand; a digest that could not be used is a problem of
        the bundle, said with the others."""
        self.evidence = assemble(self.source, self.arts)
        self.evidence.problems += [f"host digest: {n}" for n in self.notes[:20]]

    def reread_named(self, ranks: Iterable[int | None]) -> bool:
        """After a verdict: read raw the ranks it names that were served from digests. True when any was
        (the caller then judges again); every rank the verdict names then rests on its raw files."""
        ev = self.evidence
        by_rank = {r.rank: (r.record.host, r.record.pid) for r in ev.ranks if r.rank is not None}
        want = {by_rank[r] for r in ranks if r in by_rank} - self.raw_processes
        if not want:
            return False
        if len(want) > MAX_REREAD:
            want = {(r.record.host, r.record.pid) for r in ev.ranks}
        n = self.read_raw(want)
        self.reread += len(want)
        return n > 0

    def summary(self) -> dict[str, Any]:
        """What was read how, for the verdict's sections and the benchmark."""
        raw = sum(1 for d in self.from_digest if not d)
        ranks = sorted(r.rank for r in self.evidence.ranks
                       if r.rank is not None and (r.record.host, r.record.pid) in self.raw_processes)
        return {"raw_ranks": ranks[:256], "hosts_from_digest": self.hosts_used,
                "files_from_digest": len(self.arts) - raw, "files_read_raw": raw,
                "processes_read_raw": len(self.raw_processes), "reread_after_verdict": self.reread,
                "odd_ones_out_by": "classes" if self.classes and self.classes.complete else "ranks",
                "classes": self.classes.summary() if self.classes else None, "notes": self.notes[:50]}


def _workers(files: int) -> int | None:
    return min(8, os.cpu_count() or 1) if files >= PARALLEL_FILES else None


def load_digest_first(source: Source, kb: Any, log_mode: str | None = None) -> DigestRead | None:
    """Read `source` digest first; None when it is no bundle or none of its hosts has a usable digest
    (the caller reads every file raw, as before). Digests are read one host at a time and dropped once
    their files' evidence is rebuilt: memory holds the model, never every digest's JSON at once."""
    if source.manifest is None or log_mode is not None:
        return None
    by_folder: dict[str, list[int]] = {}
    for i, ref in enumerate(source.files):
        by_folder.setdefault("/".join(ref.rel.split("/", 2)[:2]), []).append(i)
    want_kb = kb_key(kb)
    read = DigestRead(source=source, line_filter=kb.line_filter)
    arts: list[Artifact | None] = [None] * len(source.files)
    parts: list[ClassSummary] = []
    undigested = 0
    job = StatedJob.of(source.manifest)  # a host's digest speaks for its own processes only, within the job's size
    for rec in source.manifest.hosts:
        dig = _usable_digest(source, rec, want_kb, read.notes, job)
        if dig is None:
            # a host that sent files without a usable digest: its ranks are in no class (rank by rank then);
            # a host that sent nothing (unreachable, timed out) has no ranks to judge either way
            undigested += bool(by_folder.get((rec.dir or "").rstrip("/")))
            continue
        read.hosts_used += 1
        parts.append(from_host(rec.host, dig.ranks, dig.host_findings))
        folder = rec.dir.rstrip("/")
        failed = False
        for i in by_folder.get(folder, ()):
            ref = source.files[i]
            try:
                arts[i] = _rebuilt(ref, dig.files.get(ref.rel[len(folder) + 1:]), ref.hints.host)
            except DigestError as err:
                if not failed:
                    failed = True
                    read.notes.append(f"digest of {dig.host}: {ref.rel}: {err}; that file read raw")
    if not read.hosts_used and not read.notes:
        return None  # a bundle written before digests: the caller reads it as it always did
    raw_idx = [i for i, a in enumerate(arts) if a is None]
    refs = [source.files[i] for i in raw_idx]
    for i, art in zip(raw_idx, read_files(refs, kb.line_filter, _workers(len(refs)))):
        arts[i] = art
    read.arts = arts  # type: ignore[assignment]
    raw_set = set(raw_idx)
    read.from_digest = [i not in raw_set for i in range(len(arts))]
    read.merged = merge_all(parts)
    read.classes = judge_classes(read.merged)
    if read.classes.complete and not undigested:  # the evidence is assembled once, after the odd ones are read raw
        processes, hosts = _odd_by_classes(read, raw_set)
    else:  # a host without a usable digest, or classes that lost something to caps: every rank, the same rules
        read.assemble()
        processes, hosts = _odd_by_ranks(read.evidence, read.merged.host_findings)
    read.read_raw(processes, hosts)
    if read.evidence is None:  # nothing read raw
        read.assemble()
    return read


def _odd_by_ranks(ev: Evidence, findings: Iterable[HostFinding]) -> tuple[set[tuple[str, int]], set[str]]:
    """The processes and hosts to read raw where the digests' classes are not the whole job: every rank's summary
    gathered from the evidence (a rank a class of one, nothing capped) and judged by the class rules
    (`judge_classes`), with the host findings the digests carried. Every process that claims an odd rank is read."""
    judged = judge_classes(gathered(summaries_of(ev), findings))
    claimants: dict[int, list[tuple[str, int]]] = {}
    for r in ev.ranks:
        if r.rank is not None:
            claimants.setdefault(r.rank, []).append((r.record.host, r.record.pid))
    keys = {(r.record.host, r.record.pid) for r in ev.ranks}
    raw = {k for g in ranks_of(judged.ranks) for k in claimants.get(g, ())}
    return raw | {k for k in judged.processes if k in keys}, set(judged.hosts)


def _odd_by_classes(read: DigestRead, raw_idx: set[int]) -> tuple[set[tuple[str, int]], set[str]]:
    """The processes and hosts to read raw, from the classes of the merged digest, plus what no host's
    digest could see: the processes the files read raw here name in an exit, exception or error (launcher
    exits, job-level files, a file its digest could not hold: `parsers.scale.named_faults`, as the focus reads them).

    Made from the manifest and the artifacts, not the assembled evidence (assembled once, after): a bundle's
    processes are its manifest's records, one per (host, pid), the last record of a pair kept
    (`parsers.gather.evidence._group_processes`)."""
    judged = read.classes
    records = {(r.host, r.pid): r for r in read.source.manifest.ranks}
    by_rank = {r.rank: key for key, r in records.items() if r.rank is not None}
    by_key = set(records)
    raw = {by_rank[g] for g in ranks_of(judged.ranks) if g in by_rank}
    raw |= {k for k in judged.processes if k in by_key}
    claims = Claims(records.values())
    for i in raw_idx:
        art = read.arts[i]
        if art.kind in registry.NOT_EVIDENCE:
            continue
        for n in named(art):
            raw.update((h, p) for h, p in claims.processes(n) if p is not None and (h, p) in by_key)
    return raw, set(judged.hosts)


def _usable_digest(source: Source, rec: Any, want_kb: str, notes: list[str], job: StatedJob) -> HostDigest | None:
    """A host's digest when it is there, valid and made for this reading; else None (a note says why,
    except when there is none: a bundle written before digests). `job`: what the manifest says of the job (each
    host's own processes, and the job's size: what bounds the ranks and peers a digest may name)."""
    folder = (rec.dir or "").rstrip("/")
    if not folder or folder.count("/") != 1:
        return None
    try:
        path = source.path(f"{folder}/{DIGEST_NAME}")
    except Exception:  # noqa: BLE001 - a manifest path that leads outside: that host is read raw
        return None
    if not os.path.lexists(path):
        return None
    try:
        dig = read_digest(path, job.own(rec.host), job.world)
    except DigestError as err:
        notes.append(f"digest of {rec.host} unusable ({err}); its raw files read")
        return None
    if dig.foreign:
        notes.append(f"digest of {rec.host}: {dig.foreign} rank summaries of processes not its own left out")
    # a host's name and folder may differ from those it wrote (the fleet's merge re-files it under the name it
    # reached it by): its files' paths and hinted host are numbers in the digest, read as the bundle files them now
    if dig.kb != want_kb:
        notes.append(f"digest of {rec.host} was made with another knowledge base; its raw files read")
    else:
        return dig
    return None
