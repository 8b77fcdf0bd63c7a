"""The demo end to end: start a real gloo job, inject a fault, wait for the hang, collect, analyze, stop."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from parsers.model.manifest import JobArtifact
from forensics.bundle.writer import BundleWriter
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from forensics.demo.launcher import start_job, stop_job, wait_for_hang, write_record
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.report.words import analyze
from parsers.model import Verdict


@dataclass
class DemoOutcome:
    bundle: Path
    verdict: Verdict
    culprit: int
    fault: str

    @property
    def correct(self) -> bool:
        return self.verdict.culprit is not None and self.verdict.culprit.rank == self.culprit


def run_demo(out: Path, ranks: int, fault: str, culprit: int, options: CollectOptions,
             quiet: bool = False) -> DemoOutcome:
    """Run the whole scenario; the job is always stopped, whatever happens."""
    if importlib.util.find_spec("torch") is None:
        raise ForensicsError("the demo needs torch: pip install 'hang-forensics[demo]' (torch==2.13.0)")
    if not 0 <= culprit < ranks:
        raise ForensicsError(f"--culprit {culprit} is not a rank of a {ranks}-rank job")
    say = (lambda *_: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    run_dir = Path(tempfile.mkdtemp(prefix="forensics-demo-"))
    say(f"demo: starting a {ranks}-rank gloo job; rank {culprit} will '{fault}' (logs in {run_dir})")
    job = start_job(run_dir, ranks, fault, culprit)
    try:
        say("demo: waiting for the hang to form...")
        try:
            wait_for_hang(job)
        except RuntimeError as err:
            raise ForensicsError(f"demo job did not hang as planned: {err}", ExitCode.FAILURE) from err
        say("demo: hung. collecting every rank...")
        writer = BundleWriter(out)
        record_rel = "launcher.json"
        write_record(job, out / record_rel)
        writer.add_artifact(JobArtifact(kind="launcher", path=record_rel))
        collect_local(out, options, pids=job.alive_pids(), quiet=quiet, writer=writer)
    finally:
        stop_job(job)
        say("demo: job stopped.")
    verdict = analyze(out).verdict
    return DemoOutcome(bundle=out, verdict=verdict, culprit=culprit, fault=fault)
