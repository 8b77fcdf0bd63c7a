"""The one typed evidence model: what every reader produces and every judge reads.

- `events`: communicator membership, operations, progress, errors, topology, RAS.
- `stacks`: frames and thread stacks from any stack tool.
- `findings`: suspects, wait edges and the verdict that judges return.
"""

from parsers.model.events import (CommMember, ErrorEvent, ErrorKind, Event, OpEvent, Origin, Parsed, Progress,
                                  RasFinding,
                                  TopoEdge, normalise_op)
from parsers.model.findings import Suspect, Verdict, WaitEdge
from parsers.model.stacks import Frame, ThreadStack

__all__ = ["CommMember", "ErrorEvent", "ErrorKind", "Event", "OpEvent", "Origin", "Parsed", "Progress", "RasFinding",
           "TopoEdge",
           "normalise_op", "Suspect", "Verdict", "WaitEdge", "Frame", "ThreadStack"]
