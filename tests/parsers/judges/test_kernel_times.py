"""A job started now on a host whose kernel log holds older real faults: `forensics collect` and `forensics hosts`
for real, with FORENSICS_DMESG printing this machine's own dmesg and then real recorded fault lines (the public
OOM kill, Xid 79 and hung task of tests/fixtures/host/kernel), stamped before the job's start or after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.bundle.writer import BundleWriter
from hostinfo_helpers import FIXTURES, host_from_files, hosts_cli, rank_with_log
from parsers import knowledge
from parsers.gather.evidence import HostEvidence, load_path
from parsers.judges.hosts import judge_hosts
from forensics.report.words import observed
from parsers.judges.kernel_times import JobStart, split_by_start
from parsers.judges.observations import observe
from parsers.model.kernel_time import KernelClock, KernelEntry
from parsers.model.findings import ObservationKind, ReasonClass

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def _real(name: str, needle: str) -> str:
    """A real kernel line of a fixture, its own stamp taken off (it is stamped anew)."""
    line = next(ln for ln in (FIXTURES / "kernel" / name).read_text().splitlines() if needle in ln)
    return line[line.index("]") + 1:].strip()


OOM = _real("public-host-faults.log", "Out of memory: Killed process 25315")
HUNG = _real("public-host-faults.log", "INFO: task python3:5604 blocked")
XID79 = _real("public-gpu-faults.log", "[155044.078590] NVRM: Xid (PCI:0000:06:00): 79")
#: a real kmsg Xid (no stamp of its own) that no knowledge-base entry matches: read as an error event only
XID145 = next(ln for ln in (FIXTURES / "kernel" / "public-gpu-faults.log").read_text().splitlines()
              if ln.startswith("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal"))

_SCRIPT = """#!{python}
import shutil, subprocess, sys, time
real = shutil.which("dmesg", path="/usr/bin:/bin:/usr/sbin:/sbin")
if real and {own!r}:  # this machine's own kernel log first (its OOM records of tests' memory cgroups, where still held)
    sys.stdout.write(subprocess.run([real, *sys.argv[1:]], capture_output=True, text=True).stdout)
def stamp(t):  # dmesg -T's form, in UTC as the collector asks (TZ=UTC)
    g = time.gmtime(t)
    return time.strftime("%a %b ", g) + "%2d " % g.tm_mday + time.strftime("%H:%M:%S %Y", g)
at = time.time() + {shift!r}
for line in {lines!r}:
    print("[" + stamp(at) + "] " + line)
"""


@pytest.fixture(scope="module")
def job():
    """A process of a job, started now (rank 0 of 1), that the tests collect."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    yield proc.pid
    proc.kill()
    proc.wait(timeout=30)


def _collect(tmp_path: Path, pid: int, lines: list[str], shift: float, own: bool = True) -> Path:
    """`forensics collect --pid` with dmesg printing `lines` stamped `shift` seconds from the moment it runs,
    after this machine's own kernel log where `own`."""
    script = tmp_path / "dmesg"
    script.write_text(_SCRIPT.format(python=sys.executable, shift=shift, lines=lines, own=own))
    script.chmod(0o755)
    out = tmp_path / "bundle"
    env = dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_DMESG=str(script))
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", str(pid), "-o", str(out), "-q"],
                          capture_output=True, text=True, env=env, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    return out


def _hosts(bundle: Path) -> tuple[int, dict]:
    out = hosts_cli(str(bundle), "--json")
    return out.returncode, json.loads(out.stdout)["hosts"][0]


def _forensics(*args: str) -> subprocess.CompletedProcess:
    """`forensics ARGS` of this checkout, as a user runs it, with the built-in knowledge base."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FORENSICS_KB", None)
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, env=env,
                          timeout=240, check=False)


@pytest.fixture(scope="module")
def before_job(tmp_path_factory, job) -> Path:
    """A bundle of the job whose kernel log holds real faults stamped 3 hours before it started, and only them:
    this machine's own records (the suite's memory-cgroup OOM kills, as many as have run) would fill the outputs'
    bounded list of notes before them, and the tests would read the machine, not the product."""
    return _collect(tmp_path_factory.mktemp("before"), job, [OOM, XID79, HUNG, XID145], shift=-3 * 3600, own=False)


def _first_errors(bundle: Path) -> list[str]:
    """The job's first error(s) as analyze's judges observe them (parsers.judges.observations), in words."""
    ev = load_path(bundle)
    reports, _suspects = judge_hosts(ev, knowledge.load(use_env=False))
    return [observed(o) for o in observe(ev, reports) if o.kind is ObservationKind.FIRST_ERROR]


def _suspects(bundle: Path) -> list:
    _reports, suspects = judge_hosts(load_path(bundle), knowledge.load(use_env=False))
    return suspects


def test_faults_stamped_hours_before_the_job_started_blame_neither_host_nor_rank(tmp_path, job):
    bundle = _collect(tmp_path, job, [OOM, XID79, HUNG], shift=-3 * 3600)
    code, host = _hosts(bundle)
    assert (code, host["status"]) == (0, "healthy"), host["reasons"]
    said = "\n".join(host["kernel_times"])
    for entry in ("oom-killer", "xid-79", "hung-task"):
        # wording is the behaviour: the report names what was left out and why
        assert f"kernel: {entry} at " in said
    assert said.count(", before the job started at ") >= 3 and said.count(": not counted [") >= 3
    own = subprocess.run(["dmesg"], capture_output=True, text=True, check=False).stdout
    if "Memory cgroup out of memory: Killed process" in own:  # this machine's own records, from hours ago
        assert "kernel: oom-killer-cgroup at " in said
    assert not [s for s in _suspects(bundle) if s.reason_class == ReasonClass.HOST_FAULT]


def test_the_same_faults_stamped_after_the_start_count(tmp_path, job):
    bundle = _collect(tmp_path, job, [OOM, XID79, HUNG], shift=0.0)
    code, host = _hosts(bundle)
    assert (code, host["status"]) == (5, "exclude")
    assert {"oom-killer", "xid-79", "hung-task"} <= {r["id"] for r in host["reasons"]}
    assert not any(f"kernel: {entry} at " in note for note in host["kernel_times"]
                   for entry in ("oom-killer", "xid-79", "hung-task"))
    blamed = [s for s in _suspects(bundle) if s.reason_class == ReasonClass.HOST_FAULT]
    assert [s.pid for s in blamed] == [job]


def test_an_oom_kill_of_the_jobs_own_process_counts_whatever_its_stamp(tmp_path, job):
    """The victim is the job's process: a stamp before its start is the stamp's error, not an older event."""
    own = OOM.replace("Killed process 25315", f"Killed process {job}")
    bundle = _collect(tmp_path, job, [own], shift=-3 * 3600)
    code, host = _hosts(bundle)
    assert (code, host["status"]) == (5, "suspect")
    assert [r["id"] for r in host["reasons"]] == ["oom-killer"] and str(job) in host["reasons"][0]["evidence"]


def test_an_older_bundle_with_no_clock_detail_counts_as_before_and_says_so(tmp_path, job):
    """The manifest as collectors wrote it before they said their clock: dmesg -T's zone is unknown."""
    bundle = _collect(tmp_path, job, [XID79], shift=-3 * 3600)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for record in manifest["hosts"][0]["collectors"]:
        if record["name"] == "kernel_log":
            for key in ("stamp_clock", "boot_epoch", "suspended_s"):
                record["details"].pop(key)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    code, host = _hosts(bundle)
    assert (code, host["status"]) == (5, "exclude")
    # wording is the behaviour: the report says why the kernel lines' times were not compared
    assert any("counted whatever their time" in n and "clock is not recorded" in n for n in host["kernel_times"])


def test_a_host_whose_processes_start_is_unknown_counts_every_finding_and_says_so(tmp_path):
    """A rank known from its log alone (no proc.json) on a host whose kernel log is real public Xid lines."""
    lines = (FIXTURES / "kernel" / "public-gpu-faults.log").read_text().splitlines()
    log = tmp_path / "kernel.log"  # the real lines without the fixture's '#' notes (a kernel log has none)
    log.write_text("\n".join(ln for ln in lines if ln.strip() and not ln.startswith("#")) + "\n")
    writer = BundleWriter(tmp_path / "b")
    host_from_files(writer, "gpu-node-7", {"kernel_log": ("kernel.log", log)})
    rank_with_log(writer, "gpu-node-7", 1, 202, ["step 7"])
    writer.save()
    code, host = _hosts(writer.root)
    assert (code, host["status"]) == (5, "exclude") and "xid-79" in {r["id"] for r in host["reasons"]}
    # wording is the behaviour: the report says why no time was compared
    assert any("job's start on this host is not known" in note for note in host["kernel_times"])


def test_a_fault_minutes_before_the_start_on_a_host_up_100_days_still_counts():
    """printk's drift over 100 days of uptime (DRIFT_PPM) is minutes: an Xid stamped 5 minutes before the job
    started may be after it, so it counts; 3 hours before is beyond any drift, so it does not."""
    clock = KernelClock.from_details({"source": "/dev/kmsg", "stamp_clock": "since boot", "boot_epoch": 1.78e9,
                                      "suspended_s": 0.0})
    start = 1.78e9 + 100 * 86400.0
    host = HostEvidence("gpu-node-7", kernel_lines=[
        KernelEntry("k", 1, XID79, f"{start - 1.78e9 - 300:.6f}", clock),
        KernelEntry("k", 2, HUNG, f"{start - 1.78e9 - 3 * 3600:.6f}", clock)])
    findings = knowledge.load(use_env=False).scan_lines([(e.line, e.text) for e in host.kernel_lines], "kernel", "k")
    counted, notes = split_by_start(findings, host, JobStart(start, frozenset({4242})))
    assert {f.entry.id for f in counted} == {"xid-79"}
    assert len(notes) == 1 and notes[0].startswith("kernel: hung-task at ")


def test_a_job_start_after_the_kernel_log_was_copied_is_not_believed():
    """A proc.json that says its process started after the collection (a wrong clock, an edited file) would hide
    every kernel fault: then nothing is left out, and the report says why."""
    clock = KernelClock.from_details({"stamp_clock": "UTC", "boot_epoch": 1.78e9, "suspended_s": 0.0,
                                      "collected_at_epoch": 1.78e9 + 3600})
    host = HostEvidence("gpu-node-7", kernel_lines=[KernelEntry("k", 1, XID79, "600.000000", clock)])
    findings = knowledge.load(use_env=False).scan_lines([(1, XID79)], "kernel", "k")
    counted, notes = split_by_start(findings, host, JobStart(1.78e9 + 7200, frozenset({4242})))
    assert [f.entry.id for f in counted] == ["xid-79"]
    # wording is the behaviour: the report says why no time was compared
    assert len(notes) == 1 and "is after the kernel log was copied" in notes[0]



def test_the_hosts_digest_leaves_out_what_the_plain_read_leaves_out(tmp_path, job):
    """A host's digest (what `analyze` reads first at fleet size) carries each kept kernel line's stamp, so its
    host findings leave out the faults from before the job as the plain read does (before, the digest lost the
    stamps: its host found what the plain read of the same files left out)."""
    from parsers.scale.digest import DIGEST_NAME, read_digest

    bundle = _collect(tmp_path, job, [OOM, XID79, HUNG], shift=-3 * 3600)
    assert not [s for s in _suspects(bundle) if s.reason_class == ReasonClass.HOST_FAULT]
    digest = read_digest(next(bundle.glob(f"hosts/*/{DIGEST_NAME}")))
    assert [f for f in digest.host_findings if f["reason_class"] == str(ReasonClass.HOST_FAULT)] == []
    (tmp_path / "late").mkdir()
    late = read_digest(next(_collect(tmp_path / "late", job, [OOM], shift=0.0).glob(f"hosts/*/{DIGEST_NAME}")))
    assert [f["rank"] for f in late.host_findings if f["reason_class"] == str(ReasonClass.HOST_FAULT)] == [0]


def test_analyze_says_in_text_and_html_the_kernel_lines_it_did_not_count(before_job, tmp_path):
    """`forensics analyze` and its HTML report say what the host judge left out, as `forensics hosts` does (before,
    only its --json carried the sentences: a reader of the text saw a fault neither counted nor said)."""
    text = _forensics("analyze", "--width", "0", str(before_job))
    assert text.returncode in (0, 3, 4), text.stderr
    page = tmp_path / "report.html"
    assert _forensics("report", "-o", str(page), str(before_job)).returncode in (0, 3, 4)
    html = page.read_text()
    listed = html[html.index('id="kernel-times"'):]
    listed = listed[:listed.index("</ul>")]
    for entry in ("oom-killer", "xid-79", "hung-task"):
        # wording is the behaviour: the outputs name what was left out and why
        assert f"kernel: {entry} at " in text.stdout and f"kernel: {entry} at " in listed
    assert text.stdout.count(": not counted [") >= 3 and listed.count(": not counted [") >= 3
    shown = [ln for ln in text.stdout.splitlines() if "kernel: oom-killer at " in ln]
    assert len(shown) == 1 and shown[0].startswith("  - host ")  # one line for the host, under its heading


def test_a_kernel_line_from_before_the_job_is_not_its_first_error(before_job, tmp_path, job):
    """An Xid stamped before the job started, with an entry (79) or without one (a Nonfatal 145: read as an error
    event only), is no error of the job: not its first error (before, analyze's summary said 'first error: xid
    (on vm): NVRM: Xid ... 79'); the same lines stamped after the start are."""
    assert not [e for e in _first_errors(before_job) if "Xid" in e]
    said = _forensics("analyze", "--json", str(before_job))
    assert "Xid" not in json.loads(said.stdout)["summary"]
    code, host = _hosts(before_job)
    # wording is the behaviour: the event no knowledge-base entry matches is said as left out too
    assert any(n.startswith("kernel: xid at ") and "not counted" in n for n in host["kernel_times"])
    after = _first_errors(_collect(tmp_path, job, [XID145], shift=0.0))
    assert any("Xid (PCI:0018:01:00): 145" in e for e in after), after
