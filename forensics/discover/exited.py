"""Ranks that have exited while their job runs on: zombies among the ranks' siblings.

Why: a rank that dies (CUDA OOM, an uncaught exception) under a launcher that has not yet
reaped it stays a zombie, and a zombie has no environment, no open files and no stacks:
discovery by RANK never finds it and the verdict could only say "rank 7 left nothing". Its
parent, its exit status and its rank can still be learned:
- its parent is the one its sibling ranks share (the launcher); /proc/PID/stat keeps the
  wait status (field 52) until it is reaped;
- the rank from its own NCCL recorder file (`nccl-recorder.<host>.<pid>.<n>.bin` in the
  siblings' FORENSICS_RECORDER_DIR, whose header holds RANK as the process saw it);
- else by elimination, stated as such: the job's WORLD_SIZE ranks all run under that parent
  here, exactly one rank has no live process and exactly one sibling is a zombie.
Its output files (where its traceback is) are gone from /proc with its fds; a launcher that
names them by rank (`node05/rank5.stderr`) is followed: a sibling's output path with the
sibling's rank number replaced by the dead rank's, kept only when that file is the dead
rank's own (opened as its user, owned by its real uid, and holding lines PyTorch prefixed
`[rankN]:` for it).
"""

from __future__ import annotations

import re
from pathlib import Path

from forensics import safefs
from forensics.discover import outputs, procfs
from forensics.discover.rankenv import RankProcess
from forensics.discover.recorder_files import recorder_dir, state_files
from parsers.input import safeio
from parsers.model.events import describe_status
from parsers.readers.recorder import RecorderFormatError, read_recorder_file

#: zombies looked at per parent (a launcher of thousands of dead children is not a rank's)
MAX_ZOMBIES = 64
#: bytes of a candidate output file read to confirm it holds the dead rank's own lines
CONFIRM_BYTES = 256 * 1024


def find_exited(ranks: list, host: str) -> list:
    """Zombie children of the parents of `ranks` (RankProcess) that are not ranks already found."""
    known = {p.pid for p in ranks}
    by_parent: dict[int, list] = {}
    for proc in ranks:
        if proc.ppid and proc.ppid > 1:
            by_parent.setdefault(proc.ppid, []).append(proc)
    out = []
    for ppid, siblings in sorted(by_parent.items()):
        zombies = [k for k in procfs.children_of(ppid, limit=4096) if k not in known
                   and procfs.state_or_none(k) == "Z"][:MAX_ZOMBIES]
        ref = siblings[0]
        for pid in zombies:
            status = procfs.exit_status(pid)
            out.append(RankProcess(
                pid=pid, host=host, rank=None, local_rank=None, world_size=ref.world_size,
                local_world_size=ref.local_world_size, group_rank=None, job_id=ref.job_id, environ={},
                cmdline=[], rank_source=None, ppid=ppid,
                job_evidence=[f"exited ({describe_status(status)}) and not reaped: a zombie child of "
                              f"pid {ppid}, the parent of ranks "
                              f"{sorted(p.rank for p in siblings if p.rank is not None)[:16]}"]))
    recover_exited_ranks(out, ranks)
    # a zombie whose rank nothing tells may be any child of the launcher (a helper, an old attempt):
    # no evidence of a rank, so it is not reported as one
    return [p for p in out if p.rank is not None]


def recover_exited_ranks(exited: list, ranks: list) -> None:
    """Set .rank of exited processes from their recorder file, else by elimination (see module doc); an
    exited process named by pid also takes its siblings' job and sizes (its own environment is gone)."""
    for proc in exited:
        sib = next((p for p in ranks if p.ppid == proc.ppid and p.rank is not None), None)
        if sib is not None:
            proc.job_id = proc.job_id or sib.job_id
            proc.world_size = proc.world_size or sib.world_size
            proc.local_world_size = proc.local_world_size or sib.local_world_size
    for proc in exited:
        if proc.rank is None:
            rank = _rank_from_recorder(proc.pid, [p for p in ranks if p.ppid == proc.ppid])
            if rank is not None:
                proc.rank, proc.rank_source = rank, "recorder-file"
                proc.job_evidence.append(f"rank {rank}: RANK in its own NCCL recorder file's header")
    for ppid in sorted({p.ppid for p in exited if p.rank is None}):
        unknown = [p for p in exited if p.ppid == ppid and p.rank is None]
        siblings = [p for p in ranks if p.ppid == ppid and p.rank is not None]
        world = next((p.world_size for p in siblings if p.world_size), None)
        if len(unknown) != 1 or not world or world > 4096:
            continue
        missing = set(range(world)) - {p.rank for p in siblings} - {p.rank for p in exited}
        if len(missing) == 1:
            proc = unknown[0]
            proc.rank, proc.rank_source = missing.pop(), "elimination"
            proc.job_evidence.append(f"rank {proc.rank} by elimination: WORLD_SIZE={world}, the other ranks run "
                                     f"under the same parent (pid {ppid}) and this is its only exited child")
    for proc in exited:
        if proc.rank is not None and not proc.outputs:
            proc.outputs = outputs_named_like_siblings(proc, [p for p in ranks if p.ppid == proc.ppid])
            if proc.outputs:
                proc.job_evidence.append(f"output found by its siblings' naming: {proc.outputs[0].path}")
        if proc.rank is not None and not proc.recorder_files:
            proc.recorder_files = copied_state(proc, [p for p in ranks if p.ppid == proc.ppid])
            if proc.recorder_files:
                proc.job_evidence.append(f"recorder state copied at its end, found by its siblings' copy folder: "
                                         f"{proc.recorder_files[0]}")


def _rank_from_recorder(pid: int, siblings: list) -> int | None:
    """RANK from the exited process's own recorder state file, in a directory its siblings name."""
    dirs: list[Path] = []
    for sib in siblings[:8]:
        d = recorder_dir(sib.pid, sib.environ)
        if d not in dirs:
            dirs.append(d)
    for d in dirs:
        for path in state_files(d, pid):
            if path.suffix != ".bin":
                continue
            try:
                st = read_recorder_file(path)
            except (RecorderFormatError, OSError):
                continue
            if st.pid == pid and st.env_rank is not None:
                return st.env_rank
    return None


#: where the recorder copies a rank's state as the rank ends (nccl_patches/src/recorder_core.c, copy_dir_config):
#: this variable ('none': nowhere), else the folder of NCCL_DEBUG_FILE; either may hold NCCL's %h and %p
COPY_KEY = "FORENSICS_RECORDER_COPY_DIR"


def copied_state(proc, siblings: list) -> list[Path]:
    """The exited rank's recorder state files, copied at its end (a clean finalize, an abort, exit) beside its
    logs: its /dev/shm file is gone, and a rank that called another collective than its peers, finished it and
    exited 0 has no other record of what it called (issue 39). Looked for in the copy folder its siblings' own
    environment names, as it expands for this process (%h, %p), and renumbered by rank as a launcher names
    per-rank folders (`node05/` -> `node07/`); files named for its own pid only. The collector then opens them
    as the rank's user (forensics.collectors.recorder)."""
    seen: list[str] = []
    for sib in siblings[:8]:
        configured = sib.environ.get(COPY_KEY) or str(Path(sib.environ.get("NCCL_DEBUG_FILE") or "").parent)
        if configured in ("", ".", "none") or len(configured) > 4096:
            continue
        own = configured.replace("%h", proc.host).replace("%p", str(proc.pid))
        renamed = renumbered(own, sib.rank, proc.rank) if sib.rank is not None and proc.rank is not None else []
        for cand in [own, *renamed]:
            if cand in seen:
                continue
            seen.append(cand)
            found = [p for p in state_files(Path(cand), proc.pid) if p.suffix == ".bin"]
            if found:
                return found
    return []


def outputs_named_like_siblings(proc, siblings: list) -> list:
    """The dead rank's output files, named as its siblings' are but with its rank (see the module doc)."""
    user = outputs.target_user(proc.pid)
    if user is None:
        return []
    for sib in siblings[:8]:
        if sib.rank is None or sib.rank == proc.rank:
            continue
        found = []
        for item in outputs.locate_outputs(sib.pid, sib.environ, sib.local_rank):
            if item.kind != "fd":
                continue
            path = next((c for c in renumbered(item.path, sib.rank,
                                               proc.rank) if _holds_rank_lines(c, proc.rank, user)),
                        None)
            if path:
                found.append(outputs.OutputFile(kind="sibling-named", stream=item.stream, path=path, open_path=path))
        if found:
            return found
    return []


def renumbered(path: str, old: int, new: int) -> list[str]:
    """`path` with the whole numbers equal to `old` (zero padding kept) made `new`: in its last one,
    two, then three components (a launcher's names: `rank5.stderr`, `node05/rank5.stderr`), so a
    number that only happens to match higher up (a temp folder's) stays; nearest first, no repeats."""
    pattern = re.compile(rf"(?<![0-9])0*{old}(?![0-9])")
    parts = path.split("/")
    out: list[str] = []
    for k in (1, 2, 3):
        if k > len(parts):
            break
        tail = [pattern.sub(lambda m: str(new).zfill(len(m.group(0))), part) for part in parts[-k:]]
        cand = "/".join(parts[:-k] + tail)
        if cand != path and cand not in out:
            out.append(cand)
    return out


def _holds_rank_lines(path: str, rank: int, user) -> bool:
    try:
        with safefs.open_for_job(path, user) as fh:  # as the dead rank's user, owned by its real uid
            data, _cut = safeio.read_bytes(fh, CONFIRM_BYTES, tail=True)
    except OSError:
        return False
    return f"[rank{rank}]:".encode() in data
