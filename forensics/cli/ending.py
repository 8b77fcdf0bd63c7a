"""How a command ends when it is told to: SIGINT (Ctrl-C), SIGTERM (kill, Slurm's scancel) and SIGHUP
(an ssh session that drops) each end every command the same way, with its own exit code.

Why one place: by default SIGTERM and SIGHUP kill a Python process at once, so `finally` blocks never ran:
the command's temporary folder (an unpacked bundle, collect --gdb's stop lock) stayed in /tmp for good,
and the exit status was a death by signal, not a code a script could branch on. Here both signals raise
`Terminated` (a KeyboardInterrupt, so the code that already unwinds cleanly on Ctrl-C unwinds the same
way), every `finally` runs, and the command exits 128 + the signal's number: 130, 143, 129.
`collect` installs its own handlers while it collects (it stops its tools and writes the manifest, marked
interrupted, with a note naming the signal); this module's are in place before and after.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading

from parsers.input.archive import Terminated

#: the signals that end a command, and the exit code each gives (128 + its number, as a shell reports it)
ENDING = {signal.SIGINT: 130, signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGHUP: 128 + signal.SIGHUP}
_OWNER: list[int] = []  #: the pid that installed the handlers: a forked worker dies of the signal instead


def exit_code(err: BaseException) -> int:
    """The exit code of a command ended by `err` (a KeyboardInterrupt or Terminated)."""
    signum = getattr(err, "signum", signal.SIGINT)
    return ENDING.get(signum, 128 + int(signum))


def signal_name(err: BaseException) -> str:
    """'SIGTERM' for a Terminated(15), 'SIGINT' for a plain KeyboardInterrupt."""
    return signal.Signals(getattr(err, "signum", signal.SIGINT)).name


def _on_signal(signum: int, _frame) -> None:
    if not _OWNER or _OWNER[0] != os.getpid():  # a forked child that inherited the handler: die as by default
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Terminated(signum)


def install() -> dict[int, object]:
    """SIGTERM and SIGHUP unwind the command as Ctrl-C does (Terminated); the handlers they had before, for
    restore(). Outside the main thread (main() called by a test's worker thread) nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    _OWNER[:] = [os.getpid()]
    return {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}


def restore(previous: dict[int, object]) -> None:
    """The handlers install() replaced, back (main() called in-process, as tests do, leaves none of ours)."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


class scoped_tempdir:
    """Every temporary file or folder made through `tempfile` during the command lands in one folder that
    is removed at the end (an unpacked archive, a fleet merge area, collect's stop lock...), so no command
    leaves forensics-* folders behind in /tmp, however it ends (remove_now for a command that must leave
    with os._exit)."""

    current: str | None = None

    def __enter__(self) -> scoped_tempdir:
        self._saved = tempfile.tempdir
        self._dir = tempfile.mkdtemp(prefix="forensics-run-")
        tempfile.tempdir = scoped_tempdir.current = self._dir
        return self

    def __exit__(self, *exc: object) -> None:
        tempfile.tempdir = self._saved
        scoped_tempdir.current = None
        shutil.rmtree(self._dir, ignore_errors=True)


def remove_now() -> None:
    """Remove the command's temporary folder at once: for a command about to leave by os._exit (collect,
    whose abandoned collector threads must not be waited for), which runs no `finally` and no atexit."""
    if scoped_tempdir.current:
        shutil.rmtree(scoped_tempdir.current, ignore_errors=True)
