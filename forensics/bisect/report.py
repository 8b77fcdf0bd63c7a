"""The final word of a bisection, as data (JSON) and as text for the on-call engineer.

It names the bad hosts (and `exclude_list`, ready for `srun --exclude=`) with their probability, the hosts it could
not decide, the evidence matrix (which job each suspect ran in, with whom, and how that went), and
what the search cost: rounds, jobs and machine-time (host-seconds).
"""

from __future__ import annotations

from typing import Any

from forensics.bisect.engine import FINISHED, Bisection
from forensics.hostset import HostSetError, fold

LETTER = {"pass": "P", "fail": "F", "hang": "H", "pending": ".", "running": "."}
MATRIX_LIMIT = 40


def build(bis: Bisection, outcome: str = "done") -> dict[str, Any]:
    """Everything the report says, as plain data."""
    q = bis.posterior()
    dec = bis.decision()
    jobs = [g for r in bis.rounds for g in r["groups"] if g["status"] in FINISHED]
    machine = sum((g["seconds"] or 0.0) * len(g["hosts"]) for g in jobs)
    units = bis.units

    def entry(i: int) -> dict[str, Any]:
        u = units[i]
        why = [bis.excluded[h] for h in u.hosts if h in bis.excluded]
        return {"unit": u.name, "hosts": list(u.hosts), "p_bad": round(float(q[i]), 6),
                **({"excluded_by": why} if why else {})}

    focus = sorted(set(dec.bad) | set(dec.undecided) | _suspects(bis))
    return {
        "outcome": outcome,
        "design": bis.settings.design,
        "confidence": bis.settings.confidence,
        "model": {"flake": bis.noise.flake, "miss": bis.noise.miss,
                  "prior": bis.noise.prior_for(len(units))},
        "bad": [entry(i) for i in sorted(dec.bad, key=lambda i: -q[i])],
        "undecided": [entry(i) for i in sorted(dec.undecided, key=lambda i: -q[i])],
        "cleared": len(dec.good),
        "hosts": sum(len(u.hosts) for u in units),
        "rounds": len(bis.rounds),
        "job_count": len(jobs),
        "machine_seconds": round(machine, 1),
        "evidence": _matrix(bis, focus[:MATRIX_LIMIT]),
        "evidence_truncated": max(0, len(focus) - MATRIX_LIMIT),
        "exclude_list": ",".join(h for i in sorted(dec.bad, key=lambda i: -q[i]) for h in units[i].hosts),
        "jobs": [{"id": g["id"], "round": r["index"] + 1, "kind": r["kind"], "hosts": g["hosts"],
                         "padding": g.get("padding", []), "status": g["status"], "rc": g.get("rc"),
                         "seconds": g.get("seconds"), "log": g.get("log")}
                        for r in bis.rounds for g in r["groups"]],
    }


def _suspects(bis: Bisection) -> set[int]:
    """Units that once looked guilty: failing in both of the first two rounds (the hand
    method's verdict), or picked to run alone or in a pair (re-tested suspects)."""
    failing = [{u for g in r["groups"] if g["status"] in ("fail", "hang") for u in g["units"]}
               for r in bis.rounds[:2]]
    hand = set.intersection(*failing) if len(failing) == 2 else set()
    small = {u for r in bis.rounds for g in r["groups"] if len(g["units"]) <= 2 and g["status"] in FINISHED
             for u in g["units"]}
    return hand | small


def _matrix(bis: Bisection, focus: list[int]) -> list[dict[str, Any]]:
    """Per suspect unit, per round: the job it ran in, its outcome, and its companions."""
    rows = []
    for i in focus:
        cells = []
        for r in bis.rounds:
            g = next((g for g in r["groups"] if i in g["units"]), None)
            if g is None:
                cells.append(None)
                continue
            others = [bis.units[u].name for u in g["units"] if u != i]
            cells.append({"job": g["id"], "status": g["status"], "with": others})
        rows.append({"unit": bis.units[i].name, "rounds": cells})
    return rows


def render(rep: dict[str, Any]) -> str:
    """The report as text."""
    out = []
    conf = rep["confidence"]
    if rep["bad"]:
        out.append(f"Bad host(s) (P(bad) >= {conf}):")
        for e in rep["bad"]:
            extra = f"  excluded by host check: {'; '.join(e['excluded_by'])}" if e.get("excluded_by") else ""
            hosts = "" if e["hosts"] == [e["unit"]] else f" [{','.join(e['hosts'])}]"
            out.append(f"  {e['unit']}{hosts}  P(bad)={e['p_bad']:.4f}{extra}")
    else:
        out.append("No bad host found.")
    if rep["undecided"]:  # hosts of one P(bad) folded, as clush -b folds them
        by_p: dict[str, list[str]] = {}
        for e in rep["undecided"]:
            by_p.setdefault(f"{e['p_bad']:.3f}", []).extend(e["hosts"])
        out.append(f"Undecided ({len(rep['undecided'])}): "
                   + ", ".join(f"{_folded(hosts)} P(bad)={p}" for p, hosts in list(by_p.items())[:20]))
    out.append(f"Cleared {rep['cleared']} of {rep['hosts']} host(s). Design {rep['design']}: "
               f"{rep['rounds']} round(s), {rep['job_count']} job(s), {rep['machine_seconds']:.0f} host-seconds.")
    if rep["bad"]:
        out.append(f"exclude: {_folded(rep['exclude_list'].split(','))}")
    if rep["outcome"] != "done":
        out.append(f"Stopped early ({rep['outcome']}).")
    if any(c is not None for row in rep["evidence"] for c in row["rounds"]):  # (no job run yet: no table)
        out.append("")
        out.append("Evidence (P pass, F fail, H hang; per round: job outcome and companions):")
        for row in rep["evidence"]:
            if all(c is None for c in row["rounds"]):
                continue  # a host no job has tested yet has no evidence row
            cells = []
            for c in row["rounds"]:
                if c is None:
                    cells.append("-")
                else:
                    with_ = ",".join(c["with"][:4]) + ("..." if len(c["with"]) > 4 else "")
                    cells.append(f"{c['job']}:{LETTER.get(c['status'], '?')}" + (f"({with_})" if with_ else "(alone)"))
            out.append(f"  {row['unit']:<14} " + "  ".join(cells))
        if rep["evidence_truncated"]:
            out.append(f"  ... {rep['evidence_truncated']} more suspect unit(s) (see --json)")
    return "\n".join(out)


def _folded(hosts: list[str]) -> str:
    """Host names folded (`node[007,031-032]`); names ClusterShell cannot fold are listed as they are."""
    try:
        return fold([h for h in hosts if h])
    except HostSetError:
        return ",".join(hosts)
