"""Runs one command on many hosts over ssh through ClusterShell, with bounded fan-out.

ClusterShell keeps at most `fanout` ssh clients alive at once (a sliding window), and
when a topology file (/etc/clustershell/topology.conf) names gateways it switches to
tree mode by itself: the command then travels through the gateways, so thousands of
hosts never hang off one process. Each host has its own time limit; a host that does
not finish in time is cut off and reported, the others go on.
"""

from __future__ import annotations

import importlib
import shlex
import threading
import time
from pathlib import Path
from typing import Callable

from ClusterShell.Defaults import DEFAULTS
from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet
from ClusterShell.Task import task_self, task_terminate

from forensics.fleet import spawn
from forensics.fleet.outcome import HostRun

OnDone = Callable[[HostRun], None]
MAX_STDERR_LINES = 50  #: last stderr lines kept per host
MAX_STDERR_LINE = 4096  #: characters kept of one stderr line
LOOPS_FROM_HOSTS = 512  #: from this many hosts (flat), two event loops start the clients (see event_loops)


class _Collector(EventHandler):
    """Keeps each host's output lines, start time and exit code as events arrive."""

    def __init__(self, runs: dict[str, HostRun], on_done: OnDone | None) -> None:
        self.runs = runs
        self.on_done = on_done
        self.started: dict[str, float] = {}

    def ev_pickup(self, worker, node):
        self.started[node] = time.monotonic()

    def ev_read(self, worker, node, sname, msg):
        text = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
        run = self.runs[node]
        if sname == "stderr":
            run.stderr.append(text[:MAX_STDERR_LINE])
            if len(run.stderr) > MAX_STDERR_LINES:  # only its tail is ever shown; a flood is not kept
                del run.stderr[0]
        else:
            run.keep(text)

    def ev_hup(self, worker, node, rc):
        run = self.runs[node]
        run.returncode = rc
        run.seconds = round(time.monotonic() - self.started.get(node, time.monotonic()), 3)
        if self.on_done:
            self.on_done(run)

    def ev_close(self, worker, timedout):
        if not timedout:
            return
        now = time.monotonic()
        for node in worker.iter_keys_timeout():
            run = self.runs[str(node)]
            run.timed_out = True
            run.seconds = round(now - self.started.get(str(node), now), 3)
            if self.on_done:
                self.on_done(run)


def by_command(hosts: list[str], command: Callable[[str], str]) -> dict[str, list[str]]:
    """Hosts grouped by the command each one runs, in first-seen order."""
    groups: dict[str, list[str]] = {}
    for host in hosts:
        groups.setdefault(command(host), []).append(host)
    return groups


def event_loops(hosts: int, fanout: int, topology: Path | None) -> int:
    """How many ClusterShell tasks to run, each on its own thread with its share of the hosts and of the fan-out.

    Why more than one: starting a client blocks its event loop until the child has exec'd
    (posix_spawn is clone(CLONE_VFORK)), ~1 ms a client on this loaded 2-core machine, and at
    4,096 hosts those waits, one after the other, were most of the time until the last answer.
    Two loops overlap them (the wait releases the GIL): 4,096 hosts with a trivial answer,
    9.3-9.5 s against 11.1-11.3 s with one loop; four were no better, eight worse
    (benchmarks/fleet_fanout.py). Tree mode keeps one: each task would start its own gateways."""
    if topology is not None or hosts < LOOPS_FROM_HOSTS or fanout < 2:
        return 1
    return 2


def _load_worker_modules() -> None:
    """Import, here and once, the worker modules every new ClusterShell Task loads (its defaults' local and
    distant workers: exec, ssh). ClusterShell imports them lazily and skips a module already in sys.modules,
    so a Task made on a second thread could see the module the first thread was still importing; seen at
    the first two-loop run of a process: "partially initialized module 'ClusterShell.Worker.Ssh' has no
    attribute 'WORKER_CLASS'"."""
    for name in (DEFAULTS.local_workername, DEFAULTS.distant_workername):
        try:
            importlib.import_module(f"ClusterShell.Worker.{name.capitalize()}")
        except ImportError:
            importlib.import_module(name)


def run_ssh(
    hosts: list[str],
    command: Callable[[str], str],
    ssh_argv_options: list[str],
    fanout: int,
    timeout: float,
    on_done: OnDone | None = None,
    ssh_path: str = "ssh",
    topology: Path | None = None,
) -> dict[str, HostRun]:
    """Run the shell string `command(host)` (already quoted) on every host; one HostRun per host.

    One ClusterShell worker per distinct command (usually one for the whole fleet: the
    command differs per host only when it names {host}); the task's fanout bounds how
    many ssh clients run at once across all of them. A worker per host would cost
    ClusterShell a worker set-up and teardown each, thousands of times. Runs in a fresh
    Task on its own thread, so callers (and tests) never share the thread-global default task;
    a large flat fleet is split between two such tasks, each with half the hosts and half
    the fan-out (event_loops).

    `topology`: a ClusterShell topology.conf whose [routes] start at this machine's short
    host name; the command then travels through its gateways (tree mode), each gateway
    running ClusterShell's own gateway (`python -m ClusterShell.Gateway`, reached by ssh)
    that starts the ssh clients to its share of the hosts.
    """
    runs = {h: HostRun(host=h) for h in hosts}
    if not hosts:
        return runs
    spawn.install()  # ssh clients by posix_spawn: a fork of a big orchestrator costs ms each
    _load_worker_modules()  # before any Task is made on a thread of ours
    handler = _Collector(runs, on_done)
    errors: list[BaseException] = []
    loops = event_loops(len(hosts), fanout, topology)
    share = -(-len(hosts) // loops)

    def body(part: list[str], window: int) -> None:
        try:
            task = task_self()  # this new thread's own task: no state shared with other callers
            task.set_info("fanout", max(1, window))
            task.set_default("stdout_msgtree", False)  # the handler keeps each host's lines: no second copy
            task.set_default("stderr_msgtree", False)
            task.set_info("ssh_path", shlex.quote(ssh_path))
            task.set_info("ssh_options", " ".join(shlex.quote(o) for o in ssh_argv_options))
            if topology is not None:
                task.load_topology(str(topology))
            for text, group in by_command(part, command).items():
                task.shell(text, nodes=NodeSet.fromlist(group, resolver=RESOLVER_NOGROUP), handler=handler,
                           timeout=timeout, stderr=True, stdin=False)
            task.resume()
            task_terminate()
        except BaseException as err:  # surfaced below: a broken transport must not pass silently
            errors.append(err)

    threads = [threading.Thread(target=body, args=(hosts[i:i + share], max(1, fanout // loops)),
                                name="forensics-fleet-ssh", daemon=True)
               for i in range(0, len(hosts), share)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return runs
