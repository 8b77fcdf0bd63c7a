"""A fixture bundle replicated to a fleet's size: its own ranks kept as they are, and healthy copies added (issue 43).

Why: the scale path (host digests, their merge, the focus over classes) must give the plain read's verdict, and
the captures under tests/fixtures have 2 to 8 ranks. Replicating one to thousands of ranks puts a real fault
(the captured culprit, its real files) in a fleet whose other ranks are copies of one rank the capture shows
healthy: the one faulty rank stays faulty, the fleet around it waits as that healthy rank waited.

What a copy of template rank `h` as global rank `R` gets, so every file says one identity:
- its own host (`<host>-x<k>`, `per_host` copies a host) and pid (tids keep their offset from the pid);
- environ.json: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE; JSON files' pid/tid fields, second-look's rank;
- its NCCL log: the `host:pid:tid` prefix, and in the job's world communicator (the one of the capture's world
  size) `rank h nranks N` -> `rank R nranks W`; lines of any other communicator (a subgroup the template was in)
  and its ring/tree/channel lines and proxy connection set-up (the capture's topology) are left out: a copy is a
  member of the world communicator only;
- its recorder files: the world communicator's header says pid, rank R of W, env rank R and its host, and each
  proxy op's peer is the template's moved by its ring offset (the template waited on its ring neighbour h+1: the
  copy waits on R+1, as a rank of a real ring does; kept as they were, a thousand copies all waited on the
  template's neighbours, a fault the capture does not have); a subgroup's recorder file is left out;
- stdout/stderr: the NCCL lines in them as in its NCCL log, and `[rankh]` -> `[rankR]`; Flight Recorder dumps and
  children/ are left out (a copy's dump would be the template's positions under another rank: the dump format is
  not rewritten here).
The capture's own ranks keep their files; their world size becomes W (environ, manifest, the world
communicator's NCCL lines and recorder headers). Host-level files stay with the capture's hosts.

Inputs are our own fixtures; the writer still bounds what it reads (files of a rank folder, one at a time).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bundle_scale import write_digests, write_sparse
from benchmarks.recorder_copy import header, recorder_as, used_ops
from forensics.report.words import analyze
from parsers import knowledge

KB = knowledge.load(use_env=False)

#: the recorder header's world size (parsers/readers/recorder.py `_HEADER_MAIN`, little-endian int at 76)
_NRANKS_AT = 76
_JSON_PID_KEYS = ("pid", "tid", "os_thread_id", "native_thread_id")
_NCCL_PREFIX = re.compile(r"^(?P<pre>(?:\[[^\]]{0,40}\] )?)"
                          r"(?P<host>[\w.-]{1,253}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) ")
_COMM_PTR = re.compile(r"comm (0x[0-9a-f]{1,16})")
_INIT = re.compile(r"comm (0x[0-9a-f]{1,16}) rank (\d{1,7}) nranks (\d{1,7})")
#: a copy leaves out the capture's topology: its ring/tree/channel positions and the proxy connections set up for
#: them ("New proxy recv connection 3 from local rank 0", "Connected to proxy localRank 0 -> connection 0x...", the
#: proxy's set-up calls "ncclPollProxyResponse Received new opId=..."): a third to four fifths of a rank's log,
#: none of it read into evidence (a closed proxy connection is another line, kept)
_TOPOLOGY = re.compile(r"NCCL INFO (?:Ring |Tree |Trees |Channel |New proxy \w{1,8} connection|Connected to proxy "
                       r"|ncclPollProxyResponse |proxyProgressAsync |Received and initiated |resp\.opId=)")
#: a copy's pid: far above the capture's, 20,000 apart a slot of its host so each tid offset stays its own
PID_BASE, PID_STEP = 100_000, 20_000
#: stand-ins for a copy's rank and host in a log rewritten once for every copy of a slot (no log holds a NUL)
_RANK_MARK, _HOST_MARK = "\0rank\0", "\0host\0"


@dataclass(frozen=True)
class Copy:
    """One copy: its global rank, host, slot on that host, pid."""

    rank: int
    host: str
    slot: int

    @property
    def pid(self) -> int:
        return PID_BASE + self.slot * PID_STEP


def _load(root: Path) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text())


def _retid(value: int, old: int, new: int) -> int:
    return new + (value - old) if old <= value < old + PID_STEP else value


def _json_ids(doc: Any, old_pid: int, new_pid: int, old_rank: int, new_rank: int) -> Any:
    """`doc` with its pid/tid fields moved to the new pid, and a top-level `rank` of the template made R."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            if k in _JSON_PID_KEYS and isinstance(v, int) and not isinstance(v, bool):
                out[k] = _retid(v, old_pid, new_pid)
            elif k == "rank" and v == old_rank:
                out[k] = new_rank
            else:
                out[k] = _json_ids(v, old_pid, new_pid, old_rank, new_rank)
        return out
    if isinstance(doc, list):
        return [_json_ids(v, old_pid, new_pid, old_rank, new_rank) for v in doc]
    return doc


def _environ(doc: dict[str, Any], rank: int | None, world: int, local: tuple[int, int] | None) -> dict[str, Any]:
    out = dict(doc)
    if "WORLD_SIZE" in out:
        out["WORLD_SIZE"] = str(world)
    if rank is not None:
        out["RANK"] = str(rank)
    if local is not None:
        out["LOCAL_RANK"], out["LOCAL_WORLD_SIZE"] = str(local[0]), str(local[1])
    return out


def _world_ptrs(text: str, world: int) -> tuple[set[str], set[str]]:
    """The comm pointers of this log's world communicator (`nranks == world`) and of every other one."""
    whole, other = set(), set()
    for ptr, _rank, n in _INIT.findall(text):
        (whole if int(n) == world else other).add(ptr)
    return whole, other - whole


def _nccl_line(line: str, rank: tuple[int, str] | None, world: tuple[int, int],
               who: tuple[str, int, int] | None) -> str:
    """One world-communicator line: its rank and world size said anew; its prefix made the copy's."""
    n_old, n_new = world
    if "rank" not in line:
        pass
    elif rank is not None:
        old, new = rank
        line = re.sub(rf"\brank {old} (nranks|nRanks) {n_old}\b", rf"rank {new} \1 {n_new}", line)
        line = line.replace(f"rank {old}/{n_old} ", f"rank {new}/{n_new} ")
        line = re.sub(rf"(Creating service thread comm 0x[0-9a-f]{{1,16}}) rank {old}\b", rf"\1 rank {new}", line)
    else:
        line = re.sub(rf"\brank (\d{{1,7}}) (nranks|nRanks) {n_old}\b", rf"rank \1 \2 {n_new}", line)
        line = re.sub(rf"\brank (\d{{1,7}})/{n_old} ", rf"rank \1/{n_new} ", line)
    line = line.replace(f"[nranks={n_old}]", f"[nranks={n_new}]")
    if who is not None:
        host, old_pid, new_pid = who
        m = _NCCL_PREFIX.match(line)
        if m:
            tid = _retid(int(m["tid"]), old_pid, new_pid)
            line = f"{m['pre']}{host}:{new_pid}:{tid} " + line[m.end():]
    return line


def _nccl_log(text: str, world: tuple[int, int], rank: tuple[int, str] | None, who: tuple[str, int, int] | None) -> str:
    """A rank's NCCL log at the new world size; a copy's (`rank`, `who` given) keeps its world communicator only."""
    whole, other = _world_ptrs(text, world[0])
    out = []
    for line in text.splitlines(keepends=True):
        ptrs = set(_COMM_PTR.findall(line))
        if who is not None and (ptrs & other or _TOPOLOGY.search(line)):
            continue
        out.append(_nccl_line(line, rank, world, who) if not ptrs or ptrs & whole else line)
    return "".join(out)


def _recorder(data: bytes, world: tuple[int, int]) -> bytes:
    """A capture's own recorder file with its header at the new world size (a file of another communicator kept as
    it is); a copy's is said again by `recorder_as` (benchmarks/recorder_copy.py)."""
    if header(data)[1] != world[0]:
        return data
    buf = bytearray(data)
    struct.pack_into("<i", buf, _NRANKS_AT, world[1])
    return bytes(buf)


def _rename(name: str, old_pid: int, new_pid: int, token: str | None, host: str) -> str:
    """A file's name with the template's `.<ncclhost>.<pid>.` made the copy's."""
    if token is not None:
        name = name.replace(f".{token}.{old_pid}.", f".{host}.{new_pid}.")
    return name.replace(f".{old_pid}.", f".{new_pid}.")


def _nccl_token(files: list[Path], pid: int) -> str | None:
    for f in files:
        m = re.fullmatch(rf"nccl(?:-recorder)?\.([\w.-]{{1,253}}?)\.{pid}\.(?:\d{{1,4}}\.bin|log)", f.name)
        if m:
            return m.group(1)
    return None


def _dropped(rel: str) -> bool:
    return rel.startswith("children/") or rel.startswith("flight_recorder/") or "fr_trace" in rel


#: a copy's rank in a JSON file written once a slot (no capture's file holds this number: `_Template` checks)
_RANK_NUMBER = 987_654_321_987


@dataclass
class _Template:
    """The template rank's files, read once a process, and what every copy of a slot shares, made once.

    Why: a copy differs from another of its slot only in its rank and host. Reading, parsing and rewriting each
    template file again for every copy was most of the fleet's writing; the bytes written are the same."""

    root: Path
    rec: dict[str, Any]
    files: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)
    token: str | None = None
    ops: dict[str, list[int]] = dataclasses.field(default_factory=dict)  #: a recorder file's used proxy ops
    slots: dict[tuple[str, int], Any] = dataclasses.field(default_factory=dict)  #: (rel, slot) -> shared form

    def __post_init__(self) -> None:
        src_dir = self.root / self.rec["dir"]
        paths = sorted(p for p in src_dir.rglob("*") if p.is_file() and not p.is_symlink())
        self.token = _nccl_token(paths, self.rec["pid"])
        self.files = [(p.relative_to(src_dir).as_posix(), p.read_bytes()) for p in paths]
        if any(str(_RANK_NUMBER).encode() in data for _, data in self.files):
            raise ValueError("a template file holds the copies' rank stand-in")


def _copy_json(data: bytes, name: str, c: Copy, tpl: dict[str, Any], world: tuple[int, int], per_host: int) -> bytes:
    """A JSON file of the template as the copy's: its environment's identity, its pid/tid and rank fields."""
    if name == "environ.json":
        return json.dumps(_environ(json.loads(data), c.rank, world[1], (c.slot, per_host))).encode()
    return json.dumps(_json_ids(json.loads(data), tpl["pid"], c.pid, tpl["rank"], c.rank)).encode()


def _copy_file(data: bytes, rel: str, c: Copy, t: _Template, ctx: tuple[tuple[int, int], int]) -> bytes | None:
    """The bytes of one template file as copy `c`'s; None to leave it out. What a slot's copies share is made
    once (`t.slots`), with `_RANK_NUMBER` or `_RANK_MARK`/`_HOST_MARK` standing for the copy's rank and host."""
    world, per_host = ctx
    tpl, name = t.rec, rel.rsplit("/", 1)[-1]
    if name.endswith(".json"):
        key = (rel, c.slot)
        if key not in t.slots:
            t.slots[key] = _copy_json(data, name, Copy(_RANK_NUMBER, "", c.slot), tpl, world, per_host)
        return t.slots[key].replace(str(_RANK_NUMBER).encode(), str(c.rank).encode())
    if name.endswith(".bin") and "recorder" in name:
        if header(data)[1] != world[0]:
            return None
        if rel not in t.ops:  # once a template file (setdefault's default was found again for every copy)
            t.ops[rel] = used_ops(data)
        ops = t.ops[rel]
        return recorder_as(data, c.rank, world[1], c.pid, c.host, ops=ops)
    if name.endswith(".log") and (rel.startswith("nccl/") or name in ("stdout.log", "stderr.log")):
        key = (rel, c.slot)  # a slot's pid and tids are every copy's in that slot: the log rewritten once a slot
        if key not in t.slots:
            text = data.decode(errors="surrogateescape")
            t.slots[key] = _nccl_log(text, world, (tpl["rank"], _RANK_MARK), (_HOST_MARK, tpl["pid"], c.pid))
        text = t.slots[key].replace(_RANK_MARK, str(c.rank)).replace(_HOST_MARK, c.host)
        if not rel.startswith("nccl/"):  # a launcher's rank prefix
            text = text.replace(f"[rank{tpl['rank']}]", f"[rank{c.rank}]")
        return text.encode(errors="surrogateescape")
    return data


def _write_copy(t: _Template, c: Copy, world: tuple[int, int], per_host: int) -> dict[str, Any]:
    """Rank `c`'s folder written from the template's; its manifest record."""
    tpl = t.rec
    new_dir = f"hosts/{c.host}/rank{c.rank}-pid{c.pid}"
    renamed: dict[str, str | None] = {}
    made: set[Path] = set()
    for rel, data in t.files:
        out_data = None if _dropped(rel) else _copy_file(data, rel, c, t, (world, per_host))
        if out_data is None:
            renamed[f"{tpl['dir']}/{rel}"] = None
            continue
        new_rel = "/".join(_rename(part, tpl["pid"], c.pid, t.token, c.host) for part in rel.split("/"))
        out = t.root / new_dir / new_rel
        if out.parent not in made:
            out.parent.mkdir(parents=True, exist_ok=True)
            made.add(out.parent)
        if out.suffix == ".bin":
            write_sparse(out, out_data)  # a recorder file is mostly empty ring: 30 GB at 100,000 ranks written whole
        else:
            out.write_bytes(out_data)
        renamed[f"{tpl['dir']}/{rel}"] = f"{new_dir}/{new_rel}"
    rec = dict(tpl)  # what differs is set here; the rest is the template's, shared (nothing changes it later)
    if isinstance(tpl.get("collectors"), list):
        rec["collectors"] = [dict(col, files=[renamed.get(p, p) for p in col.get("files") or []
                                              if renamed.get(p, p) is not None]) for col in tpl["collectors"]]
    rec.update(host=c.host, pid=c.pid, dir=new_dir, rank=c.rank, local_rank=c.slot, world_size=world[1],
               local_world_size=per_host)
    if "group_rank" in rec and rec["group_rank"] is not None:
        rec["group_rank"] = c.rank // per_host
    return rec


def _widen_own(root: Path, rec: dict[str, Any], world: tuple[int, int]) -> None:
    """A capture's own rank at the new world size: environ, NCCL logs, recorder headers, manifest record."""
    rec["world_size"] = world[1]
    d = root / rec["dir"]
    for f in sorted(p for p in d.rglob("*") if p.is_file() and not p.is_symlink()):
        if f.name == "environ.json":
            f.write_text(json.dumps(_environ(json.loads(f.read_text()), None, world[1], None)))
        elif f.name.endswith(".bin") and "recorder" in f.name:
            f.write_bytes(_recorder(f.read_bytes(), world))
        elif f.name.endswith(".log") and f.parent.name == "nccl":
            text = f.read_text(errors="surrogateescape")
            f.write_text(_nccl_log(text, world, None, None), errors="surrogateescape")


def _write_copies(root: Path, tpl: dict[str, Any], copies: list[Copy], world: tuple[int, int],
                  per_host: int) -> list[dict[str, Any]]:
    """The copies' folders written (a log rewritten once a slot); their manifest records, in order."""
    t = _Template(root, tpl)
    return [_write_copy(t, c, world, per_host) for c in copies]


def replicate(bundle: Path, dst: Path, ranks: int, template: int, per_host: int = 8, workers: int = 1) -> Path:
    """`bundle` (a folder) copied to `dst` and grown to `ranks` ranks: its own ranks kept (at world size `ranks`),
    the rest copies of its rank `template` on new hosts of `per_host` ranks, written by `workers` processes.
    Returns `dst`."""
    shutil.copytree(bundle, dst, symlinks=True)
    man = _load(dst)
    own = [r for r in man["ranks"] if isinstance(r.get("rank"), int)]
    world_old = max((r.get("world_size") or 0 for r in own), default=0) or len(own)
    tpl = next(r for r in own if r["rank"] == template)
    taken = {r["rank"] for r in own}
    world = (world_old, max(ranks, world_old))
    base = man["hosts"][0]["host"] if man["hosts"] else "node"
    # the copies take the ranks past the capture's world: a rank of it that has no process (a killed culprit) stays
    # without one (a copy in its place was a healthy rank 3 where the capture's verdict is 'rank 3 has no process')
    new = [r for r in range(world[0], world[1]) if r not in taken]
    copies = [Copy(rank=rank, host=f"{base}-x{i // per_host:05d}", slot=i % per_host) for i, rank in enumerate(new)]
    if workers <= 1 or len(copies) < 64 * workers:
        man["ranks"] += _write_copies(dst, tpl, copies, world, per_host)
    else:  # whole hosts to each task, so each host folder is one process's
        step = -(-len(copies) // (4 * workers * per_host)) * per_host
        parts = [copies[i:i + step] for i in range(0, len(copies), step)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for recs in pool.map(_write_copies, *zip(*[(dst, tpl, part, world, per_host) for part in parts])):
                man["ranks"] += recs
    man["hosts"] += [{"host": c.host, "status": "ok", "seconds": 0.0, "error": None, "dir": f"hosts/{c.host}",
                      "collectors": []} for c in copies if c.slot == 0]
    for rec in own:  # after the copies: they are made from the template's files as captured
        _widen_own(dst, rec, world)
    (dst / "manifest.json").write_text(json.dumps(man))
    return dst


def culprit_key(v: Any) -> list[tuple]:
    """Each culprit: rank, host, why (reason class), and the kinds of evidence that name it; a deadlock: its
    members (a deadlock verdict names no one culprit)."""
    out: list[tuple] = [(c.rank, c.host, str(c.reason_class), tuple(sorted(set(c.sources)))) for c in v.culprits]
    if v.deadlock is not None:
        out.append(("deadlock", tuple(sorted(v.deadlock.members))))
    return out


def unpacked(capture: Path, tmp: Path) -> Path:
    if capture.is_dir():
        return capture
    with tarfile.open(capture) as tar:  # our own archive; the data filter anyway
        tar.extractall(tmp / "x", filter="data")
    return next((tmp / "x").rglob("manifest.json")).parent


def named_ranks(v: Any) -> set[int]:
    """Every rank a verdict names: culprits, suspects (leads among them), a deadlock's members."""
    out = {s.rank for s in [*v.culprits, *v.suspects] if s.rank is not None}
    if v.deadlock is not None:
        out |= set(v.deadlock.members)
    return out


def _world_only(rank_dir: Path, world: int) -> bool:
    """Whether a rank's NCCL logs and recorder files hold no communicator but the world one (`world` ranks).

    Why: a copy is a member of the world communicator only (its other communicators' lines and recorder files are
    left out). A template that waited in a subgroup (nccl/chain's rank 0, waiting on rank 1 in a two-rank
    communicator) makes copies whose last world operation is behind the others' with no wait to show for it: a
    thousand ranks that 'never logged the operation the others wait in', a fault the capture does not have."""
    for f in sorted(p for p in rank_dir.rglob("*") if p.is_file() and not p.is_symlink()):
        if f.parent.name == "nccl" and f.name.endswith(".log"):
            if _world_ptrs(f.read_text(errors="surrogateescape"), world)[1]:
                return False
        elif f.name.endswith(".bin") and "recorder" in f.name and header(f.read_bytes())[1] != world:
            return False
    return True


def healthy_rank(bundle: Path, v: Any) -> int:
    """The copies' template: the lowest rank of the capture its verdict does not name, among those in no
    communicator but the world one where there is such a rank (see `_world_only`)."""
    man = json.loads((bundle / "manifest.json").read_text())
    recs = sorted((r for r in man["ranks"] if isinstance(r.get("rank"), int)), key=lambda r: r["rank"])
    world = max((r.get("world_size") or 0 for r in recs), default=0) or len(recs)
    healthy = [r for r in recs if r["rank"] not in named_ranks(v)]
    plain = [r for r in healthy if _world_only(bundle / r["dir"], world)]
    return (plain or healthy)[0]["rank"]


def fleet(capture: Path, tmp: Path, ranks: int, workers: int | None = None,
          seconds: dict[str, float] | None = None) -> tuple[Path, Any]:
    """The capture replicated to `ranks` ranks with every host's digest; the capture's own plain verdict.
    `workers`: processes that write the copies and the digests (default: one a core; on a fleet every host
    makes its own digest at once). `seconds`, where given, gets the wall seconds of 'replica' and 'digests'."""
    workers = workers or os.cpu_count() or 1
    own = unpacked(capture, tmp)
    v = analyze(own, KB, digests=False).verdict
    if not culprit_key(v):
        raise ValueError(f"{capture}: its own plain read names no culprit: not a fault capture to replicate")
    t = time.perf_counter()
    dst = replicate(own, tmp / "fleet", ranks, healthy_rank(own, v), workers=workers)
    made = time.perf_counter()
    write_digests(dst, KB, workers=workers)
    if seconds is not None:
        seconds.update(replica=made - t, digests=time.perf_counter() - made)
    return dst, v
