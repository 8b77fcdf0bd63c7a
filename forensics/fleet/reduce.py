"""The reduction step of tree mode: a gateway folds what its hosts returned into one merged digest.

Why: as LLNL's STAT reduces stack traces at every level of its MRNet tree, a gateway that collected
its share of the fleet sends up one merged digest (`parsers.digest_merge`: stack classes with rank
ranges, position histograms, each rank's own oddities as rank sets, wait edges), whose size follows
the job's variety, not its rank count; the raw files stay where the gateway filed them, for the root
to fetch for the ranks its class judgement marks (`parsers.digest_classes`). The root merges the
gateways' answers in the same way (merging is associative: any tree shape gives the same root).

On a gateway: `python -m forensics.fleet.reduce BUNDLE` (a job bundle the gateway merged from its
hosts' answers) prints the merged digest on stdout; a host whose digest is missing or unusable is
counted in `hosts_without_digest`, which makes the root judge rank by rank.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable

from parsers.digest import DIGEST_NAME, DigestError, read_digest
from parsers.digest_merge import MAX_MERGED_BYTES, check_merged, from_host, merge_all
from parsers.source import open_source


def reduce_bundle(bundle: Path) -> dict[str, Any]:
    """The merged digest of a bundle's hosts (one host digest read at a time: memory holds the merge only).
    A host without a usable digest is counted in `hosts_without_digest` and in `dropped`."""
    missing: list[str] = []

    def parts() -> Iterable[dict[str, Any]]:
        with open_source(bundle) as src:
            hosts = src.manifest.hosts if src.manifest else []
            for rec in hosts:
                try:
                    dig = read_digest(src.path(f"{rec.dir.rstrip('/')}/{DIGEST_NAME}")) if rec.dir else None
                except (DigestError, Exception):  # noqa: BLE001 - a host's bad digest: counted, the others merge
                    dig = None
                if dig is None:
                    missing.append(rec.host)
                    continue
                yield from_host({"host": rec.host, "ranks": dig.ranks, "host_findings": dig.host_findings})

    merged = merge_all(parts())
    merged["dropped"] += len(missing)
    merged["hosts_without_digest"] = sorted(missing)[:1024]
    return merged


def read_answer(text: str | bytes) -> dict[str, Any]:
    """A gateway's answer (its merged digest as JSON), bounded and checked; ValueError with the reason."""
    if len(text) > MAX_MERGED_BYTES:
        raise ValueError(f"{len(text)} bytes, over the {MAX_MERGED_BYTES >> 20} MiB a merged digest may have")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"not JSON: {str(err)[:200]}") from None
    if isinstance(doc, dict):
        doc.pop("hosts_without_digest", None)  # for people; the gateway counted them in `dropped` already
    return check_merged(doc)


def merge_answers(answers: Iterable[str | bytes]) -> tuple[dict[str, Any], list[str]]:
    """The root's merged digest from its gateways' answers, and why any answer was not used (its ranks are
    then not in the merge, and the count of hosts says so)."""
    good, bad = [], []
    for i, text in enumerate(answers):
        try:
            good.append(read_answer(text))
        except ValueError as err:
            bad.append(f"answer {i}: {err}")
    return merge_all(good), bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m forensics.fleet.reduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", type=Path, help="the job bundle this gateway merged from its hosts' answers")
    args = ap.parse_args(argv)
    sys.stdout.write(json.dumps(reduce_bundle(args.bundle), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
