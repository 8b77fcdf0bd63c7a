"""One stack model for every producer (py-spy JSON and text, gdb, pystack, faulthandler).

Why one: the stack judge and every output (tree, report, JSON) read these two types
only, so a new stack tool plugs in by writing one reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parsers.model.events import Origin


@dataclass(frozen=True)
class Frame:
    """One stack frame, Python or native. `file`/`line` may be unknown for native frames."""

    function: str
    file: str | None = None
    line: int | None = None
    native: bool = False
    library: str | None = None

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
