"""What a thread is doing, judged from its frames: in a collective, waiting on the GPU, or elsewhere.

Collectives are asynchronous on NCCL, so a waiting rank often sits in
torch.cuda.synchronize or Work.wait rather than in all_reduce; both count as
waiting. Anything else is 'elsewhere', described by its innermost user frame.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsers.model import Frame, ThreadStack
from parsers.model.stacks import P2P_CALLS, native_p2p_call, p2p_side, python_frames

COLLECTIVES = {
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list",
    "reduce", "gather", "scatter", "barrier", "monitored_barrier", "new_group", "new_subgroups",
    "init_process_group", "destroy_process_group", "wait", "_store_based_barrier", "all_reduce_coalesced",
    "all_gather_coalesced",
} | P2P_CALLS
NATIVE_WAIT_MARKS = ("c10d::", "gloo::", "ncclGroupEnd", "ncclAllReduce", "ProcessGroupNCCL", "ProcessGroupGloo")
GPU_SYNC_MARKS = ("cuCtxSynchronize", "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")
#: the kinds of a thread that waits on its peers (a class of a digest counts as waiting by the same words)
WAITING_KINDS = ("collective", "gpu-sync")
LIBRARY_PATHS = ("site-packages/", "dist-packages/", "/lib/python3", "<frozen", "torch/", "threading.py")
#: the kinds of a main thread that waits for others: in a collective, or on the GPU (where NCCL's waits show)
WAITING_KINDS = ("collective", "gpu-sync")


@dataclass(frozen=True)
class Activity:
    """Equivalence class of a thread's state: kind is 'collective', 'gpu-sync', 'elsewhere' or 'unknown'."""

    kind: str
    op: str | None = None
    where: str | None = None  #: innermost user frame label

    @property
    def waiting(self) -> bool:
        return self.kind in WAITING_KINDS

    @property
    def text(self) -> str:
        if self.kind == "collective":
            return f"wait in {self.op}"
        if self.kind == "gpu-sync":
            return f"wait on the GPU ({self.op})"
        if self.kind == "elsewhere":
            return f"run outside any collective at {self.where}"
        return "show no stack"


def is_library(frame: Frame) -> bool:
    """Frames of torch, site-packages and the standard library (not the user's code)."""
    if frame.native:
        return True
    path = frame.file or ""
    return any(mark in path for mark in LIBRARY_PATHS) or path.startswith("<")


def user_frame(stack: ThreadStack) -> Frame | None:
    """Innermost frame of the user's own code."""
    return next((f for f in stack.frames if not is_library(f)), None)


def classify(stack: ThreadStack | None) -> Activity:
    if stack is None or not stack.frames:
        return Activity("unknown")
    user = user_frame(stack)
    where = user.label if user else stack.frames[0].label
    for frame in stack.frames:  # innermost first
        path = frame.file or ""
        if not frame.native and "torch/distributed" in path and frame.function in COLLECTIVES:
            return Activity("collective", frame.function, where)
        if not frame.native and "torch/cuda" in path and frame.function == "synchronize":
            return Activity("gpu-sync", "torch.cuda.synchronize", where)
        if frame.native and any(m in frame.function for m in GPU_SYNC_MARKS):
            return Activity("gpu-sync", frame.function, where)
        if frame.native and any(m in frame.function for m in NATIVE_WAIT_MARKS):
            return Activity("collective", _native_wait_call(stack) or _short_native(frame.function), where)
    return Activity("elsewhere", None, where)


def _python_call(stack: ThreadStack) -> str | None:
    """The torch.distributed call a native wait sits under (py-spy --native), where the stack has one, in the
    model's window of Python frames (`python_frames`, where the call's peer is read too). Why: NCCL's own frames do
    not say which call a rank is in: a send connecting to a new peer and an all_reduce connecting its ring both
    wait in ncclGroupEndInternal (seen, NCCL 2.28.9), so ranks in different calls would look alike."""
    return next((f.function for f in python_frames(stack) if "torch/distributed" in (f.file or "")
                 and f.function in COLLECTIVES), None)


def _native_wait_call(stack: ThreadStack) -> str | None:
    """The call a native wait sits under: the torch.distributed call where the stack has any Python frame
    (`_python_call`), else c10d's point-to-point method (gdb's stack: `native_p2p_call`), so that a rank in a send
    is in a send in its stack class and rows too, whichever tool read it (issue 43 item 2)."""
    if any(not f.native for f in stack.frames):
        return _python_call(stack)
    return native_p2p_call(stack)


def p2p_call(stack: ThreadStack | None, act: Activity, kind: str | None = None) -> str | None:
    """The point-to-point call a thread is in, `act` its classified activity (`classify(stack)`), `kind` 'send' or
    'recv' for one side only (a batch has neither), or None. One answer for py-spy's, gdb's and a merged stack:
    where any Python frame names the call, it is the activity's op (the torch.distributed call); only a stack with
    no Python frame (gdb's) is read by c10d's C++ names (`native_p2p_call`). The stack names no peer."""
    if stack is None or not stack.frames:
        return None
    if any(not f.native for f in stack.frames):
        call = act.op if act.kind == "collective" and act.op in P2P_CALLS else None
    else:
        call = native_p2p_call(stack)
    side = p2p_side(call)
    return call if call and (side == kind or (kind is None and (side or call in P2P_CALLS))) else None


def _short_native(name: str) -> str:
    return name.split("(", 1)[0][-80:]
