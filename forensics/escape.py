"""The one escape of every text `forensics` prints: control characters from data shown, never run.

Why its own module: the presentation (forensics.report.text, `emit`) and collect's progress lines on stderr,
which sit below presentation, must use the same function, so a target's environment (an NCCL_DEBUG_FILE
holding an OSC title sequence or a C1 CSI) reaches no terminal raw from either.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls, and the bidi/line-separator marks a terminal
#: honours: from data (folder names, manifest hosts, log lines) they could clear the screen or
#: print a fake verdict, so the text outputs show them as escapes; and lone surrogates (a JSON '\udcff' in a
#: string from data), which no UTF-8 output can write
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def escape(text: str) -> str:
    """`text` with every control character from data shown as a visible escape (ESC -> '\\x1b').

    The one escape function of the text outputs (analyze, report's VERDICT line, hosts,
    steps): applied at the presentation boundary, line by line, so no data reaches a
    terminal raw. Newlines and tabs are the outputs' own layout and are kept; JSON
    escapes controls itself, HTML escapes through html.escape.
    """
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
