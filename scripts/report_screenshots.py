"""The two screenshots of docs/commands/report.md, made again: headless Chromium over `forensics report`.

    PYTHONPATH=. python scripts/report_screenshots.py [--chromium /usr/bin/chromium] [--out docs]

- docs/report-logs-512.png: a logs-only post-mortem of a 512-rank job (tests/logs_job.py: the line
  formats of the real capture tests/fixtures/nccl/sleep, 64 hosts x 8 GPUs, rank 347 one collective behind);
- docs/report-bundle.png: the real bundle tests/fixtures/nccl/sleep/bundle (8 ranks, rank 5 sleeps);
- docs/report-hostfaults-512.png, docs/report-hostfaults-own.png: the verdict box (the top 900 pixels) of the
  512-rank job with a real Xid 79 line (tests/fixtures/host/kernel/public-gpu-faults.log) in kernel.log of
  node007, node031 and node032, and of node043 (the culprit's own host) and node007 (issue 41).

The top of each page (window 1400 x 2000), reduced to 256 colours so each PNG stays small.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from logs_job import write_job  # noqa: E402

from forensics.report.postmortem import load  # noqa: E402
from forensics.report.html import write_report  # noqa: E402


def shoot(chromium: str, page: Path, png: Path, work: Path, height: int = 2000) -> None:
    """Screenshot of `page` into `png` (the network unused: the report is one file), then 256 colours."""
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={work / 'profile'}", f"--window-size=1400,{height}", f"--screenshot={png}",
                    page.resolve().as_uri()], check=True, capture_output=True, timeout=180)
    from PIL import Image

    Image.open(png).convert("RGB").quantize(colors=256).save(png, optimize=True)


def with_xid(root: Path, hosts: list[str]) -> Path:
    """`root` with the public Xid 79 line in kernel.log of each of `hosts`."""
    line = next(ln for ln in (REPO / "tests/fixtures/host/kernel/public-gpu-faults.log").read_text().splitlines()
                if "79, GPU has fallen off the bus" in ln)
    for host in hosts:
        (root / host / "kernel.log").write_text(line + "\n")
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", type=Path, default=REPO / "docs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-shots-") as tmp:
        work = Path(tmp)
        cases = {"report-logs-512.png": write_job(work / "job-512"),
                 "report-bundle.png": REPO / "tests" / "fixtures" / "nccl" / "sleep" / "bundle",
                 "report-hostfaults-512.png": with_xid(write_job(work / "xid-512"), ["node007", "node031", "node032"]),
                 "report-hostfaults-own.png": with_xid(write_job(work / "xid-own"), ["node043", "node007"])}
        for name, source in cases.items():
            pm = load(source)
            pm.source = source.name if source.is_relative_to(work) else str(source.relative_to(REPO))
            page = write_report(pm, work / (name + ".html"))
            shoot(args.chromium, page, args.out / name, work, height=900 if "hostfaults" in name else 2000)
            print(f"{args.out / name}: {(args.out / name).stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
