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
#: run, parsers/readers/pyspy.py) and the model's (parsers/judges/p2p_stacks.py): the innermost P2P_PY_FRAMES
#: Python frames (it sits under a logger's wrapper) among at most P2P_ALL_FRAMES. Native frames are not counted:
#: a send still connecting to its peer sits under 25 of NCCL's and torch's
P2P_PY_FRAMES = 16
P2P_ALL_FRAMES = 512


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
