"""The resumable state file of a bisection: results only (job outcomes, plans, host checks), as JSON.

Written atomically (new temp file, fsync, rename) after every job, so a bisection killed
at any moment resumes from its last finished job and replans nothing it had planned.

Results, never commands or options. The test command, launcher, ssh options, srun
arguments, hosts and settings always come from the command line; the file keeps only a
digest of them (`digest`), and a state made for other hosts or options is refused
(StateError, one line), so editing the file can neither run a command nor quietly
repeat an old answer for a new host list. The file must be a regular file of the caller's
that no other user may write to: it is read as such, never through a link.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from datetime import datetime, timezone
from typing import Any

from forensics import safefs
from parsers.input.errors import BadInput

FORMAT = "hang-forensics-bisect-state"
VERSION = 2  #: 1 kept the command and options in the file (read back and run): refused now
MAX_BYTES = 256 * 1024 * 1024  #: a state file larger than this is not ours
#: the parts of the config that are outcomes of this bisection's own checks (kept in the file)
RESULT_KEYS = ("unary_llr", "excluded", "first_round", "notes")
#: what a state file may hold at its top level; "config" (the options) never goes to disk
PERSISTED = ("format", "version", "created", "updated", "digest", "made_for", "results", "rounds", "jobs_started")


class StateError(BadInput):
    """The state file is not ours, not readable, or made for other hosts or options."""


def now() -> str:
    """UTC timestamp for the state file."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def digest(options: dict[str, Any]) -> str:
    """sha256 of the command-line options (hosts, test, launcher, settings...) a state is valid for."""
    text = json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def new_state(config: dict[str, Any], options_digest: str | None = None) -> dict[str, Any]:
    """A fresh state with its settings (in memory only: see save) and no rounds."""
    return {"format": FORMAT, "version": VERSION, "created": now(), "updated": now(),
            "digest": options_digest or digest(config), "made_for": {"hosts": _host_count(config)},
            "config": config, "rounds": [], "jobs_started": 0}


def _host_count(config: dict[str, Any]) -> int:
    return sum(len(u.get("hosts", [])) for u in config.get("units", []) if isinstance(u, dict))


def on_disk(state: dict[str, Any]) -> dict[str, Any]:
    """What is written: results only. The options stay in memory; job argv (a command) is not kept."""
    out = {k: state[k] for k in PERSISTED if k in state}
    out["results"] = {k: state.get("config", {}).get(k) for k in RESULT_KEYS}
    out["rounds"] = [{**r, "groups": [{k: v for k, v in g.items() if k != "argv"} for g in r["groups"]]}
                     if isinstance(r.get("groups"), list) else r for r in state.get("rounds", [])]
    return out


def save(state: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Replace `path` with the state's results atomically; a crash leaves the old or the new file, never half.

    safefs.replace_file, durable: a new temp file (O_CREAT|O_EXCL|O_NOFOLLOW, 0600), fsynced, renamed
    over the name, so a link planted at `path` is replaced, never written through. The folder
    must exist (the command made it, or checked it is the caller's alone).
    """
    state["updated"] = now()
    safefs.replace_file(path, json.dumps(on_disk(state), indent=1) + "\n", durable=True)


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a state file (a regular file of the caller's, not a link, that no other user may
    write to; at most MAX_BYTES); raises StateError with the reason. Its options are not known yet:
    resume() joins them from the command line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        why = "a symbolic link (not followed)" if err.errno == errno.ELOOP else (err.strerror or str(err))
        raise StateError(f"cannot read state file {path}: {why}") from err
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise StateError(f"state file {path} is not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise StateError(f"state file {path} is not yours alone (owner uid {st.st_uid}, mode "
                             f"{stat.S_IMODE(st.st_mode):o}): not used")
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise StateError(f"state file {path} is larger than {MAX_BYTES >> 20} MiB: not a bisect state")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise StateError(f"state file {path} is not valid JSON: {err}") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StateError(f"{path} is not a bisect state file (format {FORMAT!r} expected)")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise StateError(f"{path}: state version {version!r} is newer than this tool ({VERSION})")
    if version < VERSION:
        raise StateError(f"{path}: a version {version} state file, which held the test command and options; "
                         "those now come from the command line only: start a new --state")
    if not isinstance(data.get("rounds"), list) or not isinstance(data.get("results"), dict) \
            or not isinstance(data.get("digest"), str):
        raise StateError(f"{path}: state file lacks rounds, results or digest")
    return data


def resume(data: dict[str, Any], options: dict[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """The loaded state `data`, valid for the command line's `options` (refused, StateError, when its
    digest says it was made for other hosts or options), with those options as its config."""
    if data["digest"] != digest(options):
        made = data.get("made_for", {}).get("hosts") if isinstance(data.get("made_for"), dict) else None
        now_hosts = _host_count(options)
        hosts = f" (made for {made} hosts, given {now_hosts})" if isinstance(made, int) and made != now_hosts else ""
        raise StateError(f"state file {path} was made for other hosts or options{hosts}: give the same "
                         "--hosts, --test and options as when it was made, or a new --state")
    results = data["results"]
    config = dict(options)
    for key in RESULT_KEYS:
        value = results.get(key)
        default: Any = [] if key == "notes" else ({} if key in ("unary_llr", "excluded") else None)
        config[key] = value if value is not None else default
    if not isinstance(config["unary_llr"], dict) or not isinstance(config["excluded"], dict) \
            or not isinstance(config["notes"],
                              list) or not (config["first_round"] is None or isinstance(config["first_round"], list)):
        raise StateError(f"{path}: state file results have the wrong types")
    check_hosts(data, config, path)
    out = {k: v for k, v in data.items() if k in PERSISTED}
    out["config"] = config
    return out


def check_hosts(data: dict[str, Any], config: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Refuse (StateError) a state whose rounds or results name a host, unit or process the command line
    did not give: the digest covers the options, not the rounds, so a group's host list could otherwise send
    the test to `evilhost`. Each group's hosts must be exactly its units' hosts plus padding of given hosts;
    its pid, start time and token must have their types (runner.reap_orphans still proves the process)."""
    units = [list(u.get("hosts", [])) for u in config.get("units", []) if isinstance(u, dict)]
    names = {u.get("name") for u in config.get("units", []) if isinstance(u, dict)}
    given = {h for hosts in units for h in hosts} | set(config.get("good_hosts") or [])
    for rnd in data["rounds"]:
        groups = rnd.get("groups") if isinstance(rnd, dict) else None
        if not isinstance(groups, list):
            raise StateError(f"{path}: a round of the state file has no group list: not used")
        for g in groups:
            _check_group(g, units, given, path)
    results = data["results"]
    named = set(results.get("excluded") or {}) | set(results.get("unary_llr") or {})
    strangers = sorted(str(h) for h in named if h not in given and h not in names)
    first = results.get("first_round") or []
    if strangers or not all(isinstance(g, list) and all(_index(u, len(units)) for u in g) for g in first):
        raise StateError(f"{path}: state file results name hosts or units not given on the command line "
                         f"({', '.join(strangers[:3]) or 'first round'}): not used")


def _index(value: Any, count: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count


def _check_group(g: Any, units: list[list[str]], given: set[str], path: str | os.PathLike[str]) -> None:
    if not isinstance(g, dict) or not isinstance(g.get("units"), list) or not isinstance(g.get("hosts"), list):
        raise StateError(f"{path}: a job of the state file lacks its units or hosts: not used")
    padding = g.get("padding") or []
    if not isinstance(padding, list) or not all(_index(u, len(units)) for u in g["units"]):
        raise StateError(f"{path}: job {str(g.get('id'))[:40]!r} names units not given on the command line: not used")
    strangers = [str(h) for h in [*g["hosts"], *padding] if not isinstance(h, str) or h not in given]
    if strangers or g["hosts"] != [h for u in g["units"] for h in units[u]] + padding:
        shown = ", ".join(s[:64] for s in strangers[:3]) or "hosts other than its units'"
        raise StateError(f"{path}: job {str(g.get('id'))[:40]!r} would run on {shown}, not the hosts given "
                         "on the command line: not used")
    for key in ("pid", "pid_start"):
        if g.get(key) is not None and not _index(g[key], 1 << 62):
            raise StateError(f"{path}: job {str(g.get('id'))[:40]!r} has a bad {key}: not used")
    if g.get("token") is not None and not isinstance(g["token"], str):
        raise StateError(f"{path}: job {str(g.get('id'))[:40]!r} has a bad token: not used")
