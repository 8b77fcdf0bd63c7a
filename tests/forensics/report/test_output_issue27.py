"""Output a user can act on (issue 27 items 1, 2, 4, 6, 7; issue 31 item 6), through the real CLI on
real fixtures: whole lines in files and pipes, a wrapped VERDICT in a terminal, escaped control
characters, plain host names only in host lists, the inputs people have (a single log, .gz, .zip,
stdin, several paths), hosts folded as `clush -b` does, -v, steps on a healthy run, exit codes."""

from __future__ import annotations

import gzip
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import tarfile
import termios
import fcntl
import zipfile
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO
from facts import says

pytestmark = pytest.mark.integration

SIGSTOP_BUNDLE = FIXTURES / "nccl" / "sigstop" / "bundle"  #: rank 3 SIGSTOPped: a 206-character VERDICT
GLOO_SLEEP = FIXTURES / "gloo" / "sleep"  #: 4 ranks as 4 hosts, rank 1 sleeps
GPU_FAULTS = FIXTURES / "host" / "kernel" / "public-gpu-faults.log"  #: real Xid lines from public threads
XID79 = next(line for line in GPU_FAULTS.read_text().splitlines() if "79, GPU has fallen off the bus" in line)
HEALTHY_SMI = FIXTURES / "host" / "nvsmi" / "l4-healthy.xml"
STRAGGLER = FIXTURES / "straggler"


def env() -> dict:
    full = dict(os.environ, PYTHONPATH=str(REPO))
    full.pop("COLUMNS", None)
    full.pop("LINES", None)
    return full


def cli(*args: str, stdin=None, stdout=subprocess.PIPE, cwd: Path | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], stdin=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env(), timeout=timeout, cwd=cwd)


def summary(*inputs: str) -> str:
    return json.loads(cli("analyze", "--json", *inputs).stdout)["summary"]


# --- 27.1 lines ------------------------------------------------------------------------------

def test_the_whole_verdict_line_survives_a_pipe_and_a_file(tmp_path: Path):
    whole = "VERDICT: " + summary(str(SIGSTOP_BUNDLE))
    assert len(whole) > 160 and "is stopped (state T" in whole
    piped = cli("analyze", str(SIGSTOP_BUNDLE))
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines()[0] == whole
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:  # `forensics analyze B > out.txt`
        done = cli("analyze", str(SIGSTOP_BUNDLE), stdout=fh)
    assert done.returncode == 0
    lines = out.read_text().splitlines()
    assert lines[0] == whole
    assert not any(line.endswith("…") for line in lines)  # nothing cut anywhere
    assert cli("analyze", "-o", str(tmp_path / "o.txt"), str(SIGSTOP_BUNDLE)).returncode == 0
    assert (tmp_path / "o.txt").read_text().splitlines()[0] == whole


def test_a_loose_xid_79_folder_keeps_its_meaning_in_a_file(tmp_path: Path):
    folder = tmp_path / "loose" / "gpu-node-7"
    folder.mkdir(parents=True)
    (folder / "kernel.log").write_text(XID79 + "\n")
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        cli("analyze", str(tmp_path / "loose"), stdout=fh)
    first = out.read_text().splitlines()[0]
    assert first == "VERDICT: " + summary(str(tmp_path / "loose"))
    # the summary is two sentences at most (issue 27): the host's status is a line of its own under it
    # verbatim input: the Xid 79 line's own words, carried into the verdict
    # (issue 41: the host's status leads as a 'host fault' line, with its action, said once)
    # verbatim input: the Xid 79 line's own words
    assert "GPU has fallen off the bus" in first and "host fault: exclude gpu-node-7: Xid 79" in out.read_text()


def _run_in_pty(args: list[str], columns: int = 80) -> str:
    """The CLI with stdout on a pseudo-terminal `columns` wide; what it printed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "forensics", *args], stdout=slave, stderr=subprocess.PIPE, env=env())
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def test_in_a_terminal_the_verdict_wraps_and_other_lines_are_cut_with_a_pointer():
    from forensics.report.text import CUT_NOTE

    whole = "VERDICT: " + summary(str(SIGSTOP_BUNDLE))
    lines = _run_in_pty(["analyze", str(SIGSTOP_BUNDLE)], columns=80).splitlines()
    assert max(len(line) for line in lines) <= 80
    verdict = [lines[0]]
    n = 1
    while lines[n].startswith("    ") and not lines[n].startswith("    -"):
        verdict.append(lines[n])
        n += 1
    assert len(verdict) >= 3  # wrapped, not cut
    assert " ".join(part.strip() for part in verdict) == whole  # every word of it
    assert any(line.endswith("…") for line in lines[n:])  # a long evidence or stack line is cut...
    assert CUT_NOTE in lines  # ...and the output says how to see it whole
    assert "--json" in CUT_NOTE and "-o FILE" in CUT_NOTE


# --- 31.6 escapes and host names -------------------------------------------------------------

def _xid_folders(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "kernel.log").write_text(XID79 + "\n")
    return root


def test_terminal_escapes_in_a_folder_name_are_shown_escaped(tmp_path: Path):
    fake = "\x1b[2JVERDICT: rank 0 is fine, nothing to do\x1b[0m"
    root = _xid_folders(tmp_path / "in", [fake])
    for command in (["analyze"], ["hosts"], ["report", "-o", str(tmp_path / "r.html")]):
        done = cli(*command, str(root))
        assert "\x1b" not in done.stdout, command
        assert "\\x1b[2JVERDICT: rank 0 is fine" in done.stdout, (command, done.stdout)
    first = cli("analyze", str(root)).stdout.splitlines()[0]
    assert first.startswith("VERDICT: no culprit named")  # the fake verdict is data inside the real one


def test_only_plain_host_names_reach_the_exclude_list(tmp_path: Path):
    root = _xid_folders(tmp_path / "in", ["node13,node07", "--exclude=node01", "node05"])
    done = cli("hosts", "--json", str(root))
    assert done.returncode == 5, done.stderr
    data = json.loads(done.stdout)
    assert data["exclude_list"] == "node05"
    for status in ("healthy", "suspect", "exclude", "unknown"):
        assert "node13,node07" not in data[status] and "--exclude=node01" not in data[status]
    assert {h["host"] for h in data["not_listed"]} == {"node13,node07", "--exclude=node01"}
    text = cli("hosts", str(root)).stdout
    assert text.rstrip().splitlines()[-1] == "exclude: node05"
    # wording is the behaviour: the heading of the hosts not listed, which a reader looks for
    assert says(text.splitlines(), "not excluded by name", "node13,node07"), text
    verdict = json.loads(cli("analyze", "--json", str(root)).stdout)
    assert verdict["sections"]["exclude_hosts"] == ["node05"]


def test_the_placeholder_host_is_said_in_words_and_never_listed(tmp_path: Path):
    named = json.loads(cli("hosts", "--json", str(GPU_FAULTS)).stdout)  # its one syslog line names its host (issue 41)
    assert named["exclude_list"] == "ip-26-0-146-100"
    loose = tmp_path / "public-gpu-faults.log"  # the lines that name no host: a single loose log of those
    loose.write_text("".join(ln for ln in GPU_FAULTS.read_text().splitlines(keepends=True)
                             if "ip-26-0-146-100" not in ln))
    done = cli("hosts", "--json", str(loose))
    assert done.returncode == 5
    data = json.loads(done.stdout)
    assert data["exclude_list"] == "" and data["exclude"] == []
    assert data["not_listed"][0]["host"] == "unknown-host" and "names the host" in data["not_listed"][0]["why"]
    text = cli("hosts", str(loose)).stdout
    # wording is the behaviour: what a host no evidence names is called
    assert "unknown-host" not in text and "(host not in the evidence)" in text
    # wording is the behaviour: the heading of the hosts not listed, which a reader looks for
    assert says(text.splitlines(), "not excluded by name", "name no host"), text
    analyzed = cli("analyze", str(loose)).stdout
    assert "unknown-host" not in analyzed  # nor 'host unknown-host: no host evidence' under missing evidence


# --- 27.2 ages -------------------------------------------------------------------------------

def test_ages_are_measured_from_the_collection_and_the_verdict_says_when(tmp_path: Path):
    recorder = FIXTURES / "recorder" / "sigstop8"  # state files copied by hand: no manifest, no copy time
    first = cli("analyze", "--json", str(recorder)).stdout
    text = cli("analyze", str(recorder)).stdout
    lines = text.splitlines()
    # the reference time and what it is: no manifest, so the newest heartbeat stands for the collection
    assert says(lines, "times:", "2026-11-29 09:17:03 UTC", "newest NCCL recorder heartbeat"), text
    # each age sentence says from when (issue 27 item 2), not only the 'times:' line
    assert says(lines, "no progress for 7.9 s", "newest recorder heartbeat", "09:17:03 UTC"), text
    assert says(lines, "last recorder heartbeat 8.0 s", "newest recorder heartbeat", "09:17:03 UTC"), text
    assert " s old" not in text and " s ago" not in text
    copy = tmp_path / "copy"
    shutil.copytree(recorder, copy)  # a later copy, read later: the same ages
    assert json.loads(cli("analyze", "--json", str(copy)).stdout)["culprit"] == json.loads(first)["culprit"]
    read = cli("recorder", "read", str(recorder)).stdout
    assert says(read.splitlines()[:1], "times:", "2026-11-29 09:17:03 UTC", "newest heartbeat"), read
    assert says(read.splitlines(), "no progress for 7.9 s", "09:17:03 UTC"), read
    bundle = cli("analyze", str(SIGSTOP_BUNDLE)).stdout.splitlines()
    # a bundle: its manifest's time
    assert says(bundle[1:2], "times:", "2026-11-29 09:27:38 UTC", "manifest's creation time"), bundle[:3]
    # wording is the behaviour: with a manifest the time is said once, on the 'times:' line; an age counts back from it
    assert says(bundle, "last recorder heartbeat 10.5 s", "before the collection time"), bundle
    assert sum("09:27:38" in line for line in bundle) == 1, bundle


@pytest.mark.parametrize("inputs", [[FIXTURES / "recorder" / "sigstop8"], [SIGSTOP_BUNDLE], [GLOO_SLEEP]])
def test_analyze_twice_a_few_seconds_apart_gives_identical_text(inputs: list):
    """Reproducer (issue 27 item 2): 'no progress for 223414.9 s' and 'that beat is 243270 s older than
    this read' grew each time the same copies were analysed."""
    import time

    args = [str(p) for p in inputs]
    first = (cli("analyze", *args).stdout, cli("analyze", "--json", *args).stdout)
    time.sleep(3)
    again = (cli("analyze", *args).stdout, cli("analyze", "--json", *args).stdout)
    assert first[0] and first == again


# --- 27.4 inputs -----------------------------------------------------------------------------

def test_a_single_log_plain_gzipped_and_on_stdin(tmp_path: Path):
    plain = tmp_path / "console.log"
    shutil.copy(GPU_FAULTS, plain)
    packed = tmp_path / "console.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    want = summary(str(plain))
    assert "Xid" in want
    assert summary(str(packed)) == want.replace("console.log:", "console.log.gz:")
    with open(packed, "rb") as fh:
        done = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--json", "-"], stdin=fh,
                              capture_output=True, env=env(), timeout=120)
    assert json.loads(done.stdout)["summary"] == want.replace("console.log:", "stdin:")
    assert cli("hosts", str(packed)).returncode == 5 and cli("report", "-o", str(tmp_path / "r.html"),
                                                             str(packed)).returncode == 3


def test_a_zip_archive_reads_as_its_folder_and_bad_members_are_refused(tmp_path: Path):
    archive = tmp_path / "sleep.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(GLOO_SLEEP.rglob("*")):
            zf.write(p, "sleep/" + str(p.relative_to(GLOO_SLEEP)))
    want = json.loads(cli("analyze", "--json", str(GLOO_SLEEP)).stdout)
    got = json.loads(cli("analyze", "--json", str(archive)).stdout)
    assert got["culprit"]["rank"] == want["culprit"]["rank"] == 1 and got["summary"] == want["summary"]
    assert cli("hosts", str(archive)).returncode == cli("hosts", str(GLOO_SLEEP)).returncode == 3

    escape = tmp_path / "escape.zip"
    with zipfile.ZipFile(escape, "w") as zf:
        zf.writestr("../../outside.log", XID79)
    done = cli("analyze", str(escape))
    assert done.returncode == 2 and "'..' leaves the archive" in done.stderr
    assert not (tmp_path.parent / "outside.log").exists()

    link = tmp_path / "link.zip"
    with zipfile.ZipFile(link, "w") as zf:
        info = zipfile.ZipInfo("evil")
        info.external_attr = (0o120777 << 16)  # a symlink member, as `zip -y` stores one
        zf.writestr(info, "/etc/shadow")
    done = cli("analyze", str(link))
    # wording is the behaviour: the CLI's refusal of a link in an archive
    assert done.returncode == 2 and "links and special files are not allowed" in done.stderr


def test_a_bundle_plus_extra_logs_and_two_bundles(tmp_path: Path):
    extra = tmp_path / "slurm-1234.out"
    extra.write_text(XID79 + "\n")
    data = json.loads(cli("analyze", "--json", str(SIGSTOP_BUNDLE), str(extra)).stdout)
    assert data["culprit"]["rank"] == 3 and data["culprit"]["reason_class"] == "stopped"  # the manifest still leads
    hosts = json.loads(cli("hosts", "--json", str(SIGSTOP_BUNDLE), str(extra)).stdout)
    found = [r["id"] for h in hosts["hosts"] for r in h["reasons"]]
    assert "xid-79" in found  # the extra log was read with the bundle
    archive = tmp_path / "b.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(SIGSTOP_BUNDLE, arcname="bundle")
    done = cli("analyze", str(SIGSTOP_BUNDLE), str(archive))
    assert done.returncode == 2 and "a second bundle" in done.stderr


# --- 27.6 hosts agrees with analyze and folds ------------------------------------------------

def test_hosts_folds_like_clush_with_a_header_and_names_the_culprits_host(tmp_path: Path):
    root = tmp_path / "fleet"
    for i in range(1, 65):
        (root / f"node{i:03d}").mkdir(parents=True)
        shutil.copy(HEALTHY_SMI, root / f"node{i:03d}" / "nvidia-smi-q.xml")
    done = cli("hosts", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["HOST           STATUS    ACTION", "node[001-064]  healthy   -"]
    assert "missing evidence" not in cli("analyze", str(root)).stdout  # logs-only: no host evidence was expected

    sleep = cli("hosts", str(GLOO_SLEEP)).stdout.splitlines()
    assert sleep[0].split() == ["HOST", "STATUS", "ACTION"]
    assert any(line.startswith("node01 ") for line in sleep)  # the culprit's host (gloo sleep case)
    assert says(sleep, "rank 1", "node01", "culprit", "(missing-line)"), sleep
    data = json.loads(cli("hosts", "--json", str(GLOO_SLEEP)).stdout)
    verdict = json.loads(cli("analyze", "--json", str(GLOO_SLEEP)).stdout)
    assert data["culprit"]["host"] == verdict["culprit"]["host"] == "node01"
    assert ({h["host"]: h["status"] for h in data["hosts"]}
            == {h["host"]: h["status"] for h in verdict["sections"]["hosts"]})


def test_hosts_accepts_a_flat_folder_whose_lines_name_the_hosts(tmp_path: Path):
    flat = tmp_path / "flat"
    flat.mkdir()
    for log in sorted((FIXTURES / "nccl" / "sigstop").glob("node*/nccl.*.log")):
        # '686.txt': no host in the name
        shutil.copy(log, flat / log.name.replace("nccl.", "").replace(".log", ".txt").split(".", 1)[1])
    done = cli("hosts", "--json", str(flat))
    assert done.returncode in (0, 3), done.stderr  # was 2: 'no host evidence and no host named in it'
    named = {h["host"] for h in json.loads(done.stdout)["hosts"]}
    assert {f"node{i:02d}" for i in range(8)} <= named  # as the NCCL prefixes say ('node03:686:686 [0] NCCL INFO')


def test_bisect_never_takes_a_placeholder_or_odd_host_from_a_verdict(tmp_path: Path):
    from forensics.bisect.from_bundles import read_bundles

    verdict = {"summary": "s", "culprit": None, "suspects": [
        {"host": "unknown-host", "confidence": 0.9}, {"host": "node13,node07", "confidence": 0.9},
        {"host": "--exclude=node01", "confidence": 0.9}, {"host": "node05", "confidence": 0.9}]}
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(verdict))
    assert dict(read_bundles([path]).counts) == {"node05": 1}


def test_missing_host_evidence_is_folded_by_host_set():
    from forensics.report.text import fold_missing
    from parsers.model.findings import HostNote

    notes = [HostNote(f"node{i:03d}",
                      "no host evidence was collected on this host") for i in range(1, 65)] + ["x.log: binary"]
    # verbatim input: the notes pass through whole; the fold of their hosts is what is tested
    assert fold_missing(notes) == ["hosts node[001-064]: no host evidence was collected on this host", "x.log: binary"]
    # folded by the notes' typed host, never by their words: a plain line that looks like one stays as it is
    assert fold_missing(["host a: x", "host b: x"]) == ["host a: x", "host b: x"]


# --- 27.7 -v, steps, exit codes ---------------------------------------------------------------

def test_verbose_logs_each_reader_and_each_skip(tmp_path: Path):
    root = tmp_path / "logs"
    shutil.copytree(GLOO_SLEEP, root)
    (root / "empty.log").write_text("")
    (root / "link.log").symlink_to(GPU_FAULTS)
    for command in ("analyze", "hosts"):
        done = cli("-v", command, str(root))
        said = done.stderr.splitlines()
        assert says(said, "read", "node00/rank0.stdout", "rank-log"), done.stderr  # each file, and what read it
        assert says(said, "read", "fr-dump"), done.stderr
        assert says(said, "skipped", "link.log", "not a regular file"), done.stderr  # each skip, and why
        assert says(said, "skipped", "empty.log", "(empty)"), done.stderr
    done = cli("-v", "report", "-o", str(tmp_path / "r.html"), str(root))
    assert says(done.stderr.splitlines(), "skipped", "link.log", "not a regular file"), done.stderr


def test_steps_names_nothing_on_a_healthy_run_without_expected():
    healthy = sorted((STRAGGLER / "healthy").glob("steps-rank*.csv"))
    assert len(healthy) >= 2, healthy  # an empty glob would pass the loop below
    for f in healthy:
        done = cli("steps", str(f))
        assert done.returncode == 0
        assert says(done.stdout.splitlines(), "no known pattern", "healthy"), done.stdout
    ranks = cli("steps", "--ranks", *map(str, sorted((STRAGGLER / "healthy").glob("steps-rank*.csv")))).stdout
    assert ranks.startswith("no straggler") and "job-wide" not in ranks
    late = cli("steps", "--ranks", *map(str, sorted((STRAGGLER / "straggle").glob("steps-rank*.csv")))).stdout
    assert late.startswith("rank 2 arrives last")  # the real straggler is still named


@pytest.mark.parametrize("command,inputs,code", [
    ("analyze", [SIGSTOP_BUNDLE], 0),  # a culprit named
    ("analyze", ["EMPTY"], 2),  # bad input
    ("analyze", [GPU_FAULTS], 3),  # no culprit, 'coverage partial'
    ("analyze", ["HEALTHY_BUNDLE"], 4),  # no culprit, every rank covered (a healthy 8-rank H200 run)
    ("report", [SIGSTOP_BUNDLE], 0),
    ("report", ["EMPTY"], 2),
    ("report", [GPU_FAULTS], 3),
    ("report", ["HEALTHY_BUNDLE"], 4),
    ("hosts", ["HEALTHY_FLEET"], 0),  # every host healthy
    ("hosts", ["EMPTY"], 2),
    ("hosts", [GLOO_SLEEP], 3),  # hosts without usable evidence
    ("hosts", [GPU_FAULTS], 5),  # hosts to act on
    ("steps", [STRAGGLER / "healthy" / "steps-rank0.csv"], 0),
    ("steps", ["EMPTY_FILE"], 2),
    ("env", [], 0),
    ("env", ["--no-such-option"], 2),
    ("recorder", ["read", FIXTURES / "recorder" / "sigstop8"], 0),
    ("recorder", ["read", "EMPTY_FILE"], 2),
])
def test_exit_codes_follow_the_table(tmp_path: Path, command: str, inputs: list, code: int):
    def real(x):
        if x == "EMPTY":
            (tmp_path / "empty").mkdir(exist_ok=True)
            return str(tmp_path / "empty")
        if x == "EMPTY_FILE":
            (tmp_path / "steps.csv").write_text("")
            return str(tmp_path / "steps.csv")
        if x == "HEALTHY_FLEET":
            for i in range(1, 5):
                (tmp_path / "fleet" / f"node{i}").mkdir(parents=True)
                shutil.copy(HEALTHY_SMI, tmp_path / "fleet" / f"node{i}" / "nvidia-smi-q.xml")
            return str(tmp_path / "fleet")
        if x == "HEALTHY_BUNDLE":
            with tarfile.open(FIXTURES / "device" / "h200_issue15.tar.gz") as tar:
                tar.extractall(tmp_path / "i15", members=[m for m in tar.getmembers()
                                                         if m.name.startswith("h200_issue15/healthy/round0")],
                               filter="data")
            return str(tmp_path / "i15" / "h200_issue15" / "healthy" / "round0")
        return str(x)

    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    done = cli(command, *extra, *map(real, inputs))
    assert done.returncode == code, (command, inputs, done.stdout[-500:], done.stderr[-500:])


@pytest.mark.parametrize("form", ["file", "gz", "stdin", "zip", "several"])
@pytest.mark.parametrize("command", ["analyze", "hosts", "report"])
def test_every_input_form_for_analyze_hosts_and_report(tmp_path: Path, command: str, form: str):
    """Issue 27 item 4 for each of the three commands: a single log, a .gz log, '-' (stdin), a .zip, and several
    paths at once each read to the same verdict as the plain log (the Xid 79 host to exclude)."""
    plain = tmp_path / "console.log"
    plain.write_text(XID79 + "\n")
    packed = tmp_path / "console.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(plain, "logs/gpu-node-7/kernel.log")  # as `zip -r logs.zip logs` makes it
    extra = tmp_path / "slurm-1234.out"
    extra.write_text("step 10 done\n")
    inputs = {"file": [str(plain)], "gz": [str(packed)], "stdin": ["-"], "zip": [str(archive)],
              "several": [str(plain), str(extra)]}[form]
    args = [command] + (["-o", str(tmp_path / "r.html")] if command == "report" else []) + \
        (["--json"] if command != "report" else []) + inputs
    with open(packed if form == "stdin" else os.devnull, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "forensics", *args], stdin=stdin, capture_output=True, text=True,
                              env=env(), timeout=180)
    assert done.returncode == (5 if command == "hosts" else 3), (command, form, done.stderr[-500:])
    if command == "report":
        # verbatim input: the Xid 79 line's own words, carried into the verdict
        assert "Xid 79" in (tmp_path / "r.html").read_text() and "GPU has fallen off the bus" in done.stdout
        return
    data = json.loads(done.stdout)
    if command == "hosts":
        assert {h["status"] for h in data["hosts"]} == {"exclude"}
        assert data["exclude_list"] == ("gpu-node-7" if form == "zip" else "")  # a loose file names no host
    else:
        # verbatim input: the Xid 79 line's own words, carried into the verdict
        assert "GPU has fallen off the bus" in data["summary"]
