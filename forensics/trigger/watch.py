"""`forensics.arm()`: an in-process watch that collects the job before the watchdog kills it.

    import forensics
    trigger = forensics.arm(stall_after=120, out="/shared/forensics")   # before init_process_group
    for batch in loader:
        ...
        trigger.step()                                                  # once per training step

A monitor thread checks the Detector every `poll` seconds. On a stall or an abnormally
slow step, this rank writes its own Python stacks (faulthandler: works while the main
thread is blocked in C++) and its step times, then takes part in one election; the
leader starts one job-wide `forensics collect`. That happens once per process
(`max_incidents`), and only the leader collects, so a thousand stuck ranks do not
start a thousand collections. Keep `stall_after` well under the process group timeout
(default: half of `pg_timeout` when given) so the ranks are still alive to be collected.

Stragglers (forensics/trigger/straggler.py): every rank publishes in the job's store
when it entered each step's first collective; rank 0 reads them all and, when the same
rank arrives last by `straggler_ms` or more `straggler_checks` times in a row, fires a
'straggler' incident (its own budget, `max_straggler_incidents`) whose collection adds
`--samples` (py-spy samples over seconds: what the straggler does meanwhile).

Collectives are seen by wrapping the torch.distributed functions (all_reduce, ...) that
the program calls through the module (`dist.all_reduce(...)`); steps by trigger.step(),
or by every optimizer.step() when `optimizer_steps=True` (used by the env-var auto mode).
"""

from __future__ import annotations

import faulthandler
import functools
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from forensics.discover.ranks import host_name
from parsers.readers.faulthandler import TRIGGER_HEADER
from forensics.trigger import election, launch, straggler
from forensics.trigger.detector import Alarm, Detector
from forensics.trigger.envsetup import apply_env
from forensics.trigger.gc_control import GcSchedule
from parsers.input.errors import UsageError

#: point-to-point calls: not entered by every rank, so no arrival time is taken from them
POINT_TO_POINT = ("send", "recv")
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter", "send", "recv")


class Trigger:
    """The armed watch of one process. Use `step()` per training step; `disarm()` to stop."""

    def __init__(self, detector: Detector, out: Path, poll: float, collect: bool, collect_args: list[str],
                 max_incidents: int, gc_every: int | None, store: Any | None,
                 watch: straggler.StragglerWatch | None = None, straggler_every: float = 2.0,
                 max_straggler_incidents: int = 1,
                 samples: int = 20) -> None:
        self.detector = detector
        self.out = out
        self.poll = poll
        self.collect = collect
        self.collect_args = collect_args
        self.max_incidents = max_incidents
        self.gc = GcSchedule(gc_every) if gc_every else None
        self.store = store
        self.host = os.environ.get("FORENSICS_HOST") or host_name()  # the name other hosts reach this one by
        self.incidents: list[dict] = []
        # (step, seconds, end, in collectives, first enter)
        self.step_times: list[tuple[int, float, float, float, float | None]] = []
        self.watch = watch  #: the straggler watch (None: off); only rank 0 judges, every rank publishes
        self.straggler_every = straggler_every
        self.max_straggler_incidents = max_straggler_incidents
        self.samples = samples
        #: (step, first enter ns, step seconds, seconds inside collectives): what this rank publishes
        self.arrivals: deque[tuple[int, int, float | None, float]] = deque(maxlen=straggler.PUBLISH_STEPS)
        self._rows: dict[int, list] = {}  #: rank 0: every rank's steps as last read, for the incident's bundle
        self._first_enter: int | None = None  #: this step's first collective entry, wall clock ns
        self._in_collectives = 0.0  #: this step's seconds inside collectives
        self._published_at = 0.0
        self._checked_at = 0.0
        self._hosts: dict[int, str] = {}  #: rank -> host, as published (rank 0's straggler watch)
        self.applied_env: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._published = False
        self._unwrap: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._watch, name="forensics-trigger", daemon=True)

    # ---- progress, called from the training loop ------------------------------------
    def step(self) -> None:
        """Mark the end of a training step (and the start of the next)."""
        now = time.monotonic()
        with self._lock:
            duration = self.detector.step_done(now)
            ended = self.detector.step - 1
            first, inside = self._first_enter, self._in_collectives
            self._first_enter, self._in_collectives = None, 0.0
            if first is not None:
                self.arrivals.append((ended, first, duration, inside))
            if duration is not None:
                self.step_times.append((ended, duration, time.time(), inside, first / 1e9 if first else None))
        if self.gc:
            self.gc.on_step(self.detector.step)

    def collective_done(self) -> None:
        with self._lock:
            self.detector.collective_done(time.monotonic())

    # ---- identity ---------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return int(os.environ.get("RANK", "0") or 0)

    @property
    def world(self) -> int:
        return int(os.environ.get("WORLD_SIZE", "1") or 1)

    def _store(self) -> Any | None:
        return self.store if self.store is not None else election.default_store()

    def _publish(self) -> None:
        """Once the process group exists, tell the store this rank's host and pid."""
        if self._published:
            return
        store = self._store()
        if store is None:
            return
        try:
            election.publish_self(store, self.rank, self.host, os.getpid())
            self._published = True
        except Exception:
            pass

    # ---- the watch --------------------------------------------------------------------
    def start(self) -> "Trigger":
        with self._lock:
            self.detector.start(time.monotonic())
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            self._publish()
            with self._lock:
                alarm = self.detector.check(time.monotonic())
            if alarm and self._count("stall", "slow-step") < self.max_incidents:
                self.fire(alarm)
            if self.watch is not None:
                self._straggler_round(time.monotonic())

    def _count(self, *kinds: str) -> int:
        return sum(1 for i in self.incidents if i["kind"] in kinds)

    def _straggler_round(self, now: float) -> None:
        """Publish this rank's arrivals; on rank 0, judge every rank's and fire on a persistent straggler."""
        store = self._store()
        if store is None or self.watch is None:
            return
        if now - self._published_at >= straggler.PUBLISH_EVERY_S:
            self._published_at = now
            with self._lock:
                value = straggler.encode(self.arrivals)
            try:
                store.set(straggler.key(self.rank), value)
            except Exception:
                pass
        if self.rank != 0 or now - self._checked_at < self.straggler_every:
            return
        self._checked_at = now
        if self._count("straggler") >= self.max_straggler_incidents:
            return
        self._rows = straggler.read_rows(store, self.world)
        arrivals = straggler.arrivals_of(self._rows)
        if len(self._hosts) < self.world:  # hosts do not change: read them until every rank has published
            self._hosts = {r: h for r, (h, _) in election.read_members(store, self.world).items()}
        alarm = self.watch.observe(arrivals, self._hosts, self.detector.step)
        if alarm is not None:
            self.fire(alarm)

    def fire(self, alarm: Alarm) -> dict:
        """Dump our stacks and step times; if elected, start the job-wide collection."""
        family = ("straggler",) if alarm.kind == "straggler" else ("stall", "slow-step")
        number = self._count(*family) + 1
        incident = f"straggler-{number}" if alarm.kind == "straggler" else f"{number}"  # own election keys per budget
        stamp = time.strftime("%Y%m%d-%H%M%S")
        me = f"rank{self.rank}-pid{os.getpid()}"
        self.out.mkdir(parents=True, exist_ok=True)
        stacks = self.out / f"stacks-{me}-{incident}.txt"
        with open(stacks, "w") as handle:
            header = TRIGGER_HEADER.format(kind=alarm.kind, rank=self.rank, pid=os.getpid(), host=self.host,
                                           message=" ".join(str(alarm.message).split())[:2000])
            handle.write(header + "\n")  # whose stacks these are, in the file itself (parsers.readers.faulthandler)
            handle.flush()
            faulthandler.dump_traceback(handle, all_threads=True)
        self.write_steps()
        record: dict[str, Any] = {"rank": self.rank, "pid": os.getpid(), "host": self.host, "kind": alarm.kind,
                                  "message": alarm.message, "step": alarm.step, "stacks": str(stacks), "leader": False,
                                  "suspects": list(alarm.ranks)}
        self.incidents.append(record)
        if self.collect:
            store = self._store()
            leader, how = election.elect(incident, self.out / "locks", store)
            record.update(leader=leader, elected_by=how)
            if leader:
                members = election.read_members(store, self.world) if store is not None else {}
                members.setdefault(self.rank, (self.host, os.getpid()))
                bundle = self.out / f"bundle-{stamp}-{alarm.kind}"
                extra = list(self.collect_args)
                if alarm.kind == "straggler" and self.samples and "--samples" not in extra:
                    extra += ["--samples", str(self.samples)]  # what the straggler does meanwhile: samples over seconds
                if alarm.kind == "straggler" and self._rows and "--attach" not in extra:
                    try:  # the step series the alarm was judged on, attached to the bundle for `forensics analyze`
                        written = straggler.write_series(self.out / f"steps-{stamp}-{incident}", self._rows)
                        extra += [arg for path in written for arg in ("--attach", str(path))]
                    except OSError:
                        pass
                argv = launch.collection_argv(bundle, members, self.host, dict(os.environ), extra)
                proc = launch.start_collection(argv, bundle)
                record.update(bundle=str(bundle), collector_pid=proc.pid, argv=argv)
        launch.write_incident(self.out / f"incident-{me}-{incident}.json", record)
        return record

    def write_steps(self) -> Path:
        """Step times as CSV for `forensics steps`: step, seconds, end_unix_time, collective_seconds (inside the
        wrapped collectives), first_enter_unix (when the step's first collective was entered; empty: none),
        rank (so a reader knows whose series it is from the content, not the file name)."""
        path = self.out / f"steps-rank{self.rank}.csv"
        with self._lock:
            rows = list(self.step_times)
        path.parent.mkdir(parents=True, exist_ok=True)
        me = self.rank
        path.write_text(straggler.STEPS_HEADER
                        + "".join(f"{s},{d:.6f},{t:.3f},{c:.6f},{'' if e is None else f'{e:.6f}'},{me}\n"
                                  for s, d, t, c, e in rows))
        return path

    # ---- hooks -----------------------------------------------------------------------
    def track_collectives(self) -> None:
        """Wrap the torch.distributed collectives so each completed call counts as progress."""
        try:
            import torch.distributed as dist
        except ImportError:
            return
        for name in COLLECTIVES:
            original = getattr(dist, name, None)
            if original is None or getattr(original, "_forensics_wrapped", False):
                continue
            wrapped = self._wrap(original, arrival=name not in POINT_TO_POINT)
            setattr(dist, name, wrapped)
            self._unwrap.append(lambda n=name, o=original: setattr(dist, n, o))

    def _wrap(self, fn: Callable, arrival: bool = True) -> Callable:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if arrival and self._first_enter is None:
                self._first_enter = time.time_ns()  # wall clock: compared across ranks (and hosts, NTP)
            started = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            finally:
                self._in_collectives += time.monotonic() - started
            self.collective_done()  # only a call that returned is progress
            return result

        call._forensics_wrapped = True  # type: ignore[attr-defined]
        return call

    def track_optimizer_steps(self) -> None:
        """Count every optimizer.step() as a training step (for jobs whose loop we cannot edit)."""
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
        except ImportError:
            return
        handle = register_optimizer_step_post_hook(lambda *a, **k: self.step())
        self._unwrap.append(handle.remove)

    def disarm(self) -> None:
        """Stop the watch, undo the hooks and the GC schedule, write the step times."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self.poll * 2 + 1)
        for undo in reversed(self._unwrap):
            undo()
        self._unwrap.clear()
        if self.gc:
            self.gc.restore()
        if self.step_times:
            self.write_steps()


_armed: Trigger | None = None


def arm(
    stall_after: float | None = None,
    slow_factor: float = 4.0,
    out: str | Path | None = None,
    pg_timeout: float | None = None,
    window: int = 20,
    min_history: int = 5,
    min_slow: float = 1.0,
    poll: float = 0.5,
    collect: bool = True,
    collect_args: list[str] | None = None,
    max_incidents: int = 1,
    straggler_ms: float | None = 50.0,
    straggler_checks: int = 3,
    straggler_every: float = 2.0,
    max_straggler_incidents: int = 1,
    samples: int = 20,
    gc: int | None = None,
    set_env: bool = True,
    track_collectives: bool = True,
    optimizer_steps: bool = False,
    store: Any | None = None,
) -> Trigger:
    """Arm this process (call before init_process_group). Returns the Trigger; calling again returns it.

    stall_after   seconds without a finished step or collective before firing
                  (default 60, capped at half of pg_timeout when that is given)
    slow_factor   fire when a running step lasts this many times the recent median
    out           folder for stacks, step times, incident records and bundles
                  (default $FORENSICS_OUT or ./forensics-trigger; put it on shared storage)
    collect_args  extra `forensics collect` arguments (e.g. ["--ssh-option", "Port=2222"])
    straggler_ms  fire a 'straggler' incident when one rank (or host) enters each step's first collective
                  this many ms after the others, in `straggler_checks` checks `straggler_every` s apart
                  (None or 0: off); at most `max_straggler_incidents`, apart from the stall/slow-step budget;
                  its collection takes `samples` py-spy samples per rank (collect --samples)
    gc            N: disable automatic garbage collection, collect every N steps on every rank
    set_env       set the recommended NCCL / Flight Recorder / RAS variables the user has not

    Each rank publishes its host (FORENSICS_HOST, default the short host name) and pid in
    the job's store; the leader collects those hosts (or just those pids when all ranks
    share its host).
    """
    global _armed
    if _armed is not None:
        return _armed
    if stall_after is None:
        stall_after = 60.0 if pg_timeout is None else min(60.0, pg_timeout / 2)
    elif pg_timeout is not None and stall_after >= pg_timeout:
        raise UsageError(f"stall_after={stall_after} must be below pg_timeout={pg_timeout}: the watchdog would "
                         f"kill the job first")
    folder = Path(out or os.environ.get("FORENSICS_OUT") or "forensics-trigger").resolve()
    detector = Detector(stall_after=stall_after, slow_factor=slow_factor, window=window, min_history=min_history,
                        min_slow=min_slow)
    watch = straggler.StragglerWatch(late_ms=straggler_ms, persist=max(1, straggler_checks)) if straggler_ms else None
    trigger = Trigger(detector, folder, poll, collect, list(collect_args or []), max_incidents, gc, store,
                      watch=watch, straggler_every=straggler_every, max_straggler_incidents=max_straggler_incidents,
                      samples=samples)
    if set_env:
        trigger.applied_env = apply_env(folder / "logs")
    if track_collectives:
        trigger.track_collectives()
    if optimizer_steps:
        trigger.track_optimizer_steps()
    _armed = trigger.start()
    return trigger


def disarm() -> None:
    """Stop the armed trigger of this process, if any."""
    global _armed
    if _armed is not None:
        _armed.disarm()
        _armed = None
