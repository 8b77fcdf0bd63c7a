"""Start a bisection from what failed runs already said, and from single-host checks.

Verdicts: `forensics analyze --json` output ({"culprit": {"host": ...}, "suspects":
[{"host": ..., "confidence": ...}]}), a bundle folder's saved analysis.json, or any
bundle, loose folder or archive, analysed here with the one pipeline (parsers.pipeline.analyze). Every host a failed run
implicated gains prior odds; hosts implicated by more than one run are tested alone in the first round.

Host checks: any callable host -> 'healthy' | 'suspect' | 'exclude' | None (the host
evidence collectors plug in here), or a command template run per host whose exit
status says the same (0 healthy, 1 suspect, 2 exclude, anything else: no opinion).
"""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from forensics.bisect.launchers import check_host, split_template
from parsers.input import safeio
# the typed verdict: its hosts and confidences, no words (forensics.report.words)
from parsers.pipeline.analyze import analyze
from parsers.input.errors import BadInput, InputError
from parsers.judges.hosts import plain_host
from parsers.gather.source import is_archive, manifest_refusal

HostCheck = Callable[[str], "str | None"]
VERDICTS = ("healthy", "suspect", "exclude")


@dataclass
class Implication:
    """What the failed runs said about hosts."""

    counts: Counter = field(default_factory=Counter)  #: runs that implicated each host
    weight: dict[str, float] = field(default_factory=dict)  #: summed confidence per host
    sources: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  #: inputs that said nothing, and why


class BadVerdict(BadInput):
    """A verdict file that parses but says something impossible (a confidence of 1e400,
    NaN, -1 or "high"): bad input, refused before any number reaches the decoder."""


def _confidence(value: Any, default: float, where: str) -> float:
    """A confidence in [0, 1]: absent/null means `default`; anything else non-finite, out of
    range or not a JSON number is refused (a silent clamp once turned 1e400 into "no bad host")."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadVerdict(f"{where}: confidence {value!r} is not a number")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise BadVerdict(f"{where}: confidence {value!r} is not between 0 and 1")
    return float(value)


def _hosts_of_verdict(data: Any, where: str = "verdict") -> dict[str, float]:
    """host -> confidence from one analyze --json verdict (a culprit without one counts as 1)."""
    found: dict[str, float] = {}
    if not isinstance(data, dict):
        return found
    culprit = data.get("culprit")
    if isinstance(culprit, dict) and isinstance(culprit.get("host"), str):
        c = _confidence(culprit.get("confidence"), 1.0, f"{where}: culprit")
        found[culprit["host"]] = max(found.get(culprit["host"], 0.0), c)
    suspects = data.get("suspects") or []
    if not isinstance(suspects, list):
        raise BadVerdict(f"{where}: suspects is not a list")
    for i, s in enumerate(suspects):
        if isinstance(s, dict) and isinstance(s.get("host"), str):
            c = _confidence(s.get("confidence"), 0.5, f"{where}: suspects[{i}]")
            found[s["host"]] = max(found.get(s["host"], 0.0), c)
    return found


def _hosts_of_manifest(data: Any) -> dict[str, float]:
    """Hosts named by a bundle manifest: weak evidence (they took part in a failed run)."""
    found: dict[str, float] = {}
    if not isinstance(data, dict):
        return found
    for key in ("hosts", "ranks", "missing"):
        for item in data.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("host"), str):
                found[item["host"]] = 0.1
    return found


MAX_VERDICT_BYTES = 64 * 1024 * 1024


def _read_json(path: Path) -> Any:
    """Parse JSON text (never pickle), bounded in size; RecursionError (deep nesting) is bad JSON."""
    with safeio.open_regular(path) as fh:  # a FIFO or device is refused, never waited on
        raw, cut = safeio.read_bytes(fh, MAX_VERDICT_BYTES)
    if cut:
        raise BadVerdict(f"larger than {MAX_VERDICT_BYTES} bytes")
    try:
        return json.loads(raw)
    except RecursionError as err:
        raise BadVerdict("nested too deeply") from err


def read_one(path: Path) -> tuple[dict[str, float], str | None]:
    """Hosts implicated by one verdict file or bundle folder, or a reason it said nothing."""
    try:
        if path.is_dir() and (path / "analysis.json").is_file():
            return _hosts_of_verdict(_read_json(path / "analysis.json"), str(path / "analysis.json")), None
        if path.is_dir() or is_archive(path):
            return _hosts_of_source(path)
        data = _read_json(path)
        hosts = _hosts_of_verdict(data, str(path)) or _hosts_of_manifest(data)
        return hosts, None if hosts else f"{path}: names no host"
    except BadVerdict:
        raise
    except (OSError, ValueError, RecursionError) as err:  # one input that cannot be read is skipped, said why
        return {}, f"{path}: unreadable ({type(err).__name__}: {str(err)[:200]})"


def _hosts_of_source(path: Path) -> tuple[dict[str, float], str | None]:
    """Analyse a bundle, folder or archive; its verdict's hosts, else the hosts its manifest names."""


    try:
        result = analyze(path)
    except InputError as err:
        hosts = _damaged_manifest_hosts(path)
        return (hosts, None) if hosts else ({}, f"{path}: {err}")
    hosts = _hosts_of_manifest(result.evidence.manifest.to_dict()) if result.evidence.manifest is not None else {}
    if result.evidence.manifest is None and manifest_refusal(result.evidence.skipped) is not None:
        hosts = _damaged_manifest_hosts(path)  # analysed as a loose folder: the damaged manifest may still name hosts
    for host, weight in _hosts_of_verdict(result.verdict.to_dict(), str(path)).items():
        hosts[host] = max(weight, hosts.get(host, 0.0))
    return hosts, None if hosts else f"{path}: names no host"


def _damaged_manifest_hosts(path: Path) -> dict[str, float]:
    """The hosts a bundle's damaged manifest still names (it says which hosts took part), else none."""
    manifest = path / "manifest.json"
    if not (path.is_dir() and manifest.is_file()):
        return {}
    try:
        return _hosts_of_manifest(_read_json(manifest))
    except (OSError, ValueError, TypeError):  # (TypeError: a list field that is a number)
        return {}


def read_bundles(paths: Iterable[str | Path]) -> Implication:
    """Tally hosts over all failed runs. Unreadable inputs are listed as problems; a
    verdict with an impossible confidence raises BadVerdict (the caller exits 2)."""
    imp = Implication()
    for p in paths:
        path = Path(p)
        hosts, problem = read_one(path)
        if problem:
            imp.problems.append(problem)
            continue
        imp.sources.append(str(path))
        for h, c in hosts.items():
            # the placeholder of lines no host names, or no host name at all: never a host to test
            if not plain_host(h):
                continue
            imp.counts[h] += 1
            imp.weight[h] = imp.weight.get(h, 0.0) + c
    return imp


def prior_llr(imp: Implication, known: Iterable[str]) -> dict[str, float]:
    """Log prior-odds boost per host: x(1 + 4*confidence) for each run that implicated it.

    A culprit named by one run thus counts about 5 to 1, twice about 25 to 1: strong
    enough to test it first, weak enough that the group jobs still decide.
    """
    known = set(known)
    out = {}
    for h, count in imp.counts.items():
        if h in known:
            out[h] = count * math.log(1 + 4 * imp.weight[h] / count)
    return out


def repeat_suspects(imp: Implication, known: Iterable[str]) -> list[str]:
    """Hosts implicated by more than one failed run, most implicated first."""
    known = set(known)
    return [h for h, c in imp.counts.most_common() if c > 1 and h in known]


def command_check(template: str, argv_for: Callable[[list[str], str], list[str]], timeout: float) -> HostCheck:
    """A HostCheck that runs `template` ({host} substituted per argument) through a launcher."""

    base = split_template(template)

    def check(host: str) -> str | None:
        argv = argv_for([a.replace("{host}", check_host(host)) for a in base], host)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=timeout, start_new_session=True)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return {0: "healthy", 1: "suspect", 2: "exclude"}.get(done.returncode)

    return check


def run_checks(hosts: Iterable[str], check: HostCheck) -> dict[str, str]:
    """host -> verdict for every host the check had an opinion on."""
    out = {}
    for h in hosts:
        v = check(h)
        if v in VERDICTS:
            out[h] = v
    return out
