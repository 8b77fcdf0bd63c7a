"""Host identity from a kernel line itself (issue 41 item 2): syslog, journalctl short / iso / monotonic /
verbose, dmesg -T, clush/pdsh labels, srun --label; on real lines (tests/fixtures/host/identity/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.pipeline.analyze import analyze
from parsers.judges.hosts import EXCLUDE
from parsers.readers.host_kernel import read_kernel_log, split_line

IDENTITY = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "identity"
XID79 = "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus."


def _public_blocks() -> list[tuple[str, str | None, list[str]]]:
    """(source, host or None, lines) of each block of public.log."""
    blocks: list[tuple[str, str | None, list[str]]] = []
    for line in (IDENTITY / "public.log").read_text().splitlines():
        if line.startswith("# source: "):
            blocks.append((line[10:], None, []))
        elif line.startswith("# host: "):
            source, _, lines = blocks[-1]
            blocks[-1] = (source, None if line[8:] == "-" else line[8:], lines)
        elif line and not line.startswith("#"):
            blocks[-1][2].append(line)
    return blocks


@pytest.mark.parametrize("source,host,lines", _public_blocks(), ids=lambda x: x if isinstance(x, str) else None)
def test_public_lines_name_their_host(source: str, host: str | None, lines: list[str]) -> None:
    for line in lines:
        stamp, named, message = split_line(line)
        assert named == host, (source, line)
        assert stamp is not None and message and not message.startswith(("kernel", host or "\0"))


@pytest.mark.parametrize("form", ["short", "short-iso", "short-iso-precise", "short-monotonic", "verbose"])
def test_local_journalctl_forms(form: str) -> None:
    lines = read_kernel_log((IDENTITY / f"journalctl-{form}.txt").read_text())
    xid = [ln for ln in lines if "Xid" in ln.message]
    assert len(xid) == 1 and xid[0].host == "vm" and xid[0].stamp
    assert xid[0].message.startswith("NVRM: Xid (PCI:0000:04:00): 79")
    # (journald's own: not kernel)
    assert {ln.host for ln in lines if "kernel" in ln.raw or form == "verbose"} == {"vm"}


def test_verbose_reads_messages_only() -> None:
    lines = read_kernel_log((IDENTITY / "journalctl-verbose.txt").read_text())
    assert [ln.message[:9] for ln in lines][-2:] == ["NVRM: Xid", "mlx5_core"]
    assert not any("=" in ln.message[:12] for ln in lines)  # no _PID=, _HOSTNAME= field is a message


def test_clush_label_names_the_host() -> None:
    lines = read_kernel_log((IDENTITY / "clush-local.txt").read_text())
    assert [ln.host for ln in lines] == ["node031", "node032"]
    assert all(ln.message == XID79 and ln.stamp == "Sat Dec  6 03:12:44 2026" for ln in lines)


@pytest.mark.parametrize("line,host", [
    ("3: [Sat Dec  6 03:12:44 2026] " + XID79, None),  # srun --label: a task number, not a host
    ("12: Dec  6 03:12:44 node043 kernel: " + XID79, "node043"),  # srun --label around a syslog line
    ("gpu-b7: Dec  6 03:12:44 gpu-b7 kernel: " + XID79, "gpu-b7"),  # pdsh around syslog
    ("NVRM: Xid (PCI:0000:01:00): 43, Ch 00000020", None),  # a driver word is no host
    ("ACPI: [Firmware Bug]: BIOS _OSI(Linux) query ignored", None),
    ("epoch12: [rank0] loss 0.3", None),  # not before a kernel line: a program's own words
    ("kernel: NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, NVLink", None),  # journalctl, host cut
])
def test_labels(line: str, host: str | None) -> None:
    _stamp, named, message = split_line(line)
    assert named == host
    if XID79 in line:
        assert message == XID79


def _folder(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("text,hosts", [
    (f"Dec  6 03:12:44 node043 kernel: {XID79}\nDec  6 03:12:45 node044 kernel: {XID79}\n", {"node043", "node044"}),
    (f"node031: [Sat Dec  6 03:12:44 2026] {XID79}\nnode032: [Sat Dec  6 03:12:44 2026] {XID79}\n",
     {"node031", "node032"}),
    (f"2026-12-06T03:12:44+0000 node007 kernel: {XID79}\n", {"node007"}),
])
def test_loose_file_hosts_reach_the_host_judge(tmp_path: Path, text: str, hosts: set[str]) -> None:
    """A loose syslog/clush file of several machines: each line's host is excluded by name, no 'host not named'."""
    result = analyze(_folder(tmp_path, "kernel.txt", text))
    excluded = {r.host for r in result.hosts if r.status == EXCLUDE}
    assert excluded == hosts
    assert {r.host for r in result.hosts} == hosts


def test_job_log_with_pasted_syslog_line(tmp_path: Path) -> None:
    """A host line pasted into a rank's output names its host; the finding is that host's, not 'unknown-host'."""
    text = ("[rank2]:[E1129 09:26:54.447934717 ProcessGroupNCCL.cpp:689] [Rank 2] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=11, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=30000) ran for 30079 "
            "milliseconds before timing out.\n"
            f"Dec  6 03:12:44 node043 kernel: {XID79}\n")
    result = analyze(_folder(tmp_path, "job.log", text))
    assert "node043" in {r.host for r in result.hosts if r.status == EXCLUDE}
    assert "unknown-host" not in {r.host for r in result.hosts if r.status == EXCLUDE}
