"""One stack model for every producer (py-spy JSON and text, gdb, pystack, faulthandler).

Why one: the stack judge and every output (tree, report, JSON) read these two types
only, so a new stack tool plugs in by writing one reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parsers.model.events import Origin


#: torch.distributed's blocking point-to-point calls -> the argument that names the peer, a global rank (the
#: group_dst/group_src forms name a rank of the group passed, no global rank)
P2P_PEER_ARG = {"send": "dst", "recv": "src"}
#: the window a point-to-point call is looked for in, the same for py-spy's raw frames (the collector's --locals
#: run, parsers/readers/pyspy.py) and the model's (`python_frames`: the call a stack's activity names, the peer its
#: frame kept): the innermost P2P_PY_FRAMES
#: Python frames (it sits under a logger's wrapper) among at most P2P_ALL_FRAMES. Native frames are not counted:
#: a send still connecting to its peer sits under 25 of NCCL's and torch's
P2P_PY_FRAMES = 16
P2P_ALL_FRAMES = 512
#: torch.distributed's point-to-point calls, as a Python frame names them (a stack's activity, the p2p judge, the
#: stack-class rule, a traceback's innermost frame, the py-spy reader's frames whose locals are read): the sends and
#: the receives, and the batch of both
SENDS = frozenset({"send", "isend"})
RECVS = frozenset({"recv", "irecv"})
P2P_CALLS = SENDS | RECVS | {"batch_isend_irecv"}
#: c10d's C++ point-to-point methods of a process group (c10d::ProcessGroupNCCL::send, c10d::ProcessGroup::send,
#: c10d::ProcessGroupGloo::recvAnysource): method -> the side; read only on a stack with no Python frame (gdb's),
#: where no torch.distributed call is named. Only a process group's: gloo's own gloo::transport::tcp::Pair::send
#: carries every collective's bytes, and libc's send() every socket's
NATIVE_P2P = {"send": "send", "recv": "recv", "recvAnysource": "recv"}
NATIVE_P2P_CLASS = "c10d::ProcessGroup"
#: frames of a stack looked at for them, and for NCCL's connection set-up that sits on top of c10d's send
#: (~20 frames; parsers/judges/p2p.py)
P2P_NATIVE_FRAMES = 64


def p2p_side(call: str | None) -> str | None:
    """'send' or 'recv' for a point-to-point call named by Python (`SENDS`, `RECVS`) or by c10d's C++
    (`NATIVE_P2P`); None for anything else, and for a batch (it holds both sides)."""
    name = call or ""
    if name in SENDS or name in RECVS:
        return "send" if name in SENDS else "recv"
    return _native_side(name)


def _native_side(name: str) -> str | None:
    """The side of a process group's C++ method `name` (`NATIVE_P2P` of a `NATIVE_P2P_CLASS`*), read without its
    parameters and case (a class's op may come lowered); None for any other name."""
    cls, _, method = bare_name(name).lower().rpartition("::")
    prefix = NATIVE_P2P_CLASS.lower()
    if not cls.startswith(prefix) or "::" in cls[len(prefix):]:
        return None
    return next((side for m, side in NATIVE_P2P.items() if m.lower() == method), None)


def is_p2p(call: str | None) -> bool:
    """Whether a call (a stack's activity's op, a class's) is a point-to-point one: it waits on its one peer, not on
    the group, so it is never a collective the others did not reach."""
    return call in P2P_CALLS or p2p_side(call) is not None


@dataclass(frozen=True)
class Frame:
    """One stack frame, Python or native. `file`/`line` may be unknown for native frames."""

    function: str
    file: str | None = None
    line: int | None = None
    native: bool = False
    library: str | None = None
    #: the integer arguments a point-to-point frame of torch.distributed kept from py-spy --locals (name, value),
    #: and nothing else (parsers/readers/pyspy.py: p2p_args); no part of the frame's identity in a stack tree
    args: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    @property
    def p2p(self) -> tuple[str, int] | None:
        """('send', dst) or ('recv', src) where this is torch.distributed's blocking send or recv and its kept
        arguments name the peer (a global rank); None otherwise (a recv from any source names none)."""
        key = P2P_PEER_ARG.get(self.function)
        value = dict(self.args).get(key) if key else None
        return (self.function, value) if value is not None else None

    @property
    def label(self) -> str:
        """'func (file:line)', the key frames are merged on."""
        where = ""
        if self.file:
            where = f" ({self.file}:{self.line})" if self.line else f" ({self.file})"
        elif self.library:
            where = f" [{self.library.rsplit('/', 1)[-1]}]"
        return f"{self.function}{where}"


@dataclass
class ThreadStack:
    """The stack of one thread, innermost frame first (as py-spy and gdb print them)."""

    thread_id: int
    name: str | None = None
    frames: list[Frame] = field(default_factory=list)
    active: bool | None = None
    owns_gil: bool | None = None
    is_main: bool = False
    #: the thread a fatal signal landed in (faulthandler's `Current thread`): where a segfault happened; for
    #: the watchdog's SIGABRT, its own C++ thread (no Python frame)
    signalled: bool = False
    source: str = ""  #: which tool produced it: 'py-spy', 'gdb', ...
    #: where a stack found inside a log was read (file, line of its thread header, the rank its lines
    #: carry); None for a stack tool's own file, whose identity is the file's
    origin: Origin | None = None


def python_frames(stack: ThreadStack) -> list[Frame]:
    """The Python frames a point-to-point call is looked for in: the innermost P2P_PY_FRAMES of them among at most
    P2P_ALL_FRAMES frames (native ones are not counted: a send still connecting to its peer sits under 25 of
    NCCL's and torch's). One window for the call a stack's activity names and the peer its frame kept."""
    return [f for f in stack.frames[:P2P_ALL_FRAMES] if not f.native][:P2P_PY_FRAMES]


def native_p2p_call(stack: ThreadStack) -> str | None:
    """c10d's C++ point-to-point method among the innermost P2P_NATIVE_FRAMES frames (`NATIVE_P2P`), for a stack
    with no Python frame to name the call (gdb's). Seen, NCCL 2.28.9: a send to a new peer waits in ncclGroupEnd
    (ncclTransportP2pSetup, bootstrapRecv) under c10d::ProcessGroupNCCL::send, so the innermost frame does not say
    it is a send. Only c10d's names: libc's own send() or recv() on a socket is no call of the job's."""
    return next((f.function for f in stack.frames[:P2P_NATIVE_FRAMES]
                 if _native_side(f.function)), None)


def bare_name(name: str) -> str:
    """A C++ function's name without its parameter list or a trailing ' const': gdb's JSON keeps them
    ('c10d::TCPStore::wait(std::vector<...> const&, ...)'), py-spy's symbols do not ('c10d::ProcessGroupNCCL::send'),
    so one name is read the same from both. A '(anonymous namespace)' inside the name stays. One pass, bounded by
    the name."""
    name = name.removesuffix(" const")
    depth = 0
    for i in range(len(name) - 1, -1, -1) if name.endswith(")") else ():
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i]
    return name
