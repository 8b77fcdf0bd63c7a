"""Host-wide files are inside a byte budget of their own (issue 40): the kernel log, df, nvidia-smi, the sysfs and
procfs copies and the host's digest draw on the per-host cap (`collect --host-max-mib`) and the collection's.

Inputs are built here, large, from real captures (tests/fixtures/nccl_x2/mixed/kill/bundle/hosts/vm: a real
host's kernel.log, df.txt, nvidia-smi-q.txt and .xml), and each file goes through its collector's own writer and
then its reader: a text past the cap keeps whole lines and a cut line its reader skips, JSON and XML are whole or
left out, and each cut is said in the budget's notes (the manifest's note)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from forensics.collect.budget import ByteBudget, write_within
from forensics.collect.local import _within, collect_local
from forensics.collectors.base import CollectOptions, HostTarget
from forensics.collectors.host_common import save_json, save_text
from forensics.collectors.host_infiniband import InfinibandCollector
from forensics.collectors.host_kernel_log import KernelLogCollector
from forensics.collectors.host_nvidia_smi import _save as save_nvsmi
from forensics.bundle.digest import write_host_digest
from parsers.input.cutmark import CUT_MARK, cut_bytes, is_cut_line
from parsers.readers import host_kernel, host_nvsmi, host_system
from parsers.scale.digest import DIGEST_NAME, read_digest

HOST = FIXTURES / "nccl_x2/mixed/kill/bundle/hosts/vm"
MiB = 1 << 20


def _target(tmp_path: Path, host_cap: int, total: int = 1 << 30) -> tuple[HostTarget, ByteBudget]:
    parent = ByteBudget(total, "per-collection")
    return HostTarget("vm", tmp_path, "hosts/vm", ByteBudget(host_cap, "per-host", parent=parent)), parent


def _kernel_flood() -> str:
    """The real kernel log, then a flood of 400,000 lines (about 38 MiB), then the Xid that matters, last."""
    real = (HOST / "kernel.log").read_text()
    flood = "".join(f"[Sun Nov 29 09:40:{n % 60:02d} 2026] hostile: line {n} of a flood {'x' * 40}\n"
                    for n in range(400_000))
    return real + flood + "[Sun Nov 29 09:41:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"


def test_a_flooded_kernel_log_keeps_its_newest_whole_lines_within_the_host_cap(tmp_path):
    text = _kernel_flood()
    assert len(text) > 38 * MiB
    target, parent = _target(tmp_path, 1 * MiB)
    options = CollectOptions(log_tail_bytes=64 * MiB)  # the log's own tail cap is not what stops it here
    record = KernelLogCollector()._save(target, options, "dmesg -T", text, [])
    path = tmp_path / record.files[0]
    data = path.read_bytes()
    assert record.status == "ok" and len(data) <= 1 * MiB and parent.used == target.budget.used == len(data)
    lines = data.decode().splitlines(keepends=True)
    assert is_cut_line(lines[0]) and not any(is_cut_line(ln) for ln in lines[1:])
    assert "".join(lines[1:]) == text[len(text) - len("".join(lines[1:])):]  # the newest lines, whole
    assert lines[1].startswith("[Sun Nov 29") and cut_bytes(lines) == len(text) - len("".join(lines[1:]))
    read = host_kernel.read_kernel_log(data.decode())
    assert read[0].line_no == 2 and not any(CUT_MARK.strip() in ln.raw for ln in read)
    assert "GPU has fallen off the bus" in read[-1].message  # verbatim input: the newest line built above
    assert len(parent.cuts) == 1 and parent.cuts[0].startswith("vm kernel.log: cut to ")
    assert "per-host cap of 1 MiB" in parent.cuts[0]


_XID = "[Sun Nov 29 09:41:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."


def test_a_dmesg_of_90_mb_is_read_for_its_newest_lines_and_written_within_the_host_cap(tmp_path, monkeypatch):
    """A hostile host's dmesg (a real program, FORENSICS_DMESG) prints the real kernel.log, a flood of 1,000,000
    lines (about 90 MB, past run_tool's 64 MiB cap, which kept the oldest lines) and the Xid last. Only the log's
    tail is held while it is read, the newest whole lines are written under the 1 MiB host cap, and the reader
    finds the Xid."""
    script = tmp_path / "dmesg"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(HOST / 'kernel.log')!r}).read())\n"
                      f"chunk = {'[Sun Nov 29 09:40:00 2026] hostile: a flood line ' + 'x' * 40 + chr(10)!r} * 10000\n"
                      f"for _ in range(100):\n    sys.stdout.write(chunk)\nprint({_XID!r})\n")
    script.chmod(0o755)
    monkeypatch.setenv("FORENSICS_DMESG", str(script))
    target, parent = _target(tmp_path / "b", 1 * MiB)
    record = KernelLogCollector().collect(target, CollectOptions(timeout=60))
    assert record.status == "ok" and record.details["source"] == "dmesg -T" and record.details["truncated"]
    data = (tmp_path / "b" / record.files[0]).read_text()
    assert len(data.encode()) <= 1 * MiB and parent.used == len(data.encode())
    lines = data.splitlines()
    assert is_cut_line(lines[0]) and lines[-1] == _XID and lines[1].startswith("[Sun Nov 29 09:40:00 2026] hostile")
    assert host_kernel.read_kernel_log(data)[-1].message.startswith("NVRM: Xid")


def test_a_kernel_log_is_left_out_when_not_even_its_cut_line_fits(tmp_path):
    target, parent = _target(tmp_path, 40)
    record = KernelLogCollector()._save(target, CollectOptions(), "dmesg -T", (HOST / "kernel.log").read_text(), [])
    # wording is the behaviour: the record names the cap that left the file out
    assert record.status == "skipped" and not record.files and "per-host cap of 40 bytes" in record.error
    assert parent.used == 0 and not (tmp_path / "hosts/vm/kernel.log").exists()
    assert "not copied" in parent.cuts[0]


def test_df_of_100000_mounts_keeps_its_header_and_first_whole_lines(tmp_path):
    real = (HOST / "df.txt").read_text()
    mounts = "".join(f"tmpfs                   tmpfs          4        0         4       0% /mnt/m{n}\n"
                     for n in range(100_000))
    text = real + mounts
    target, parent = _target(tmp_path, 256 << 10)
    rel = save_text(target, "df.txt", text)
    kept = (tmp_path / rel).read_text()
    assert len(kept.encode()) <= 256 << 10 and kept.startswith(real)
    lines = kept.splitlines(keepends=True)
    assert is_cut_line(lines[-1]) and text.startswith("".join(lines[:-1]))
    facts = host_system.parse_df(kept)
    assert len(facts) == len(lines) - 2  # every kept mount line (not the header, not the cut line)
    assert not any("cap" in key or "left" in key for key in facts)
    assert parent.used == len(kept.encode()) and "vm df.txt: cut to" in parent.cuts[0]


def test_nvidia_smi_text_is_cut_at_a_line_and_its_xml_left_out_whole(tmp_path):
    text = (HOST / "nvidia-smi-q.txt").read_text() * 200  # ~5.8 MB: a host of very many GPUs, or a lying tool
    xml = (HOST / "nvidia-smi-q.xml").read_text() * 40  # ~2.2 MB
    target, parent = _target(tmp_path, 1 * MiB)
    files: list[str] = []
    runs: dict = {"text": {}, "xml": {}}
    save_nvsmi(target, "nvidia-smi-q.txt", text, files, runs["text"])
    save_nvsmi(target, "nvidia-smi-q.xml", xml, files, runs["xml"])
    assert files == ["hosts/vm/nvidia-smi-q.txt"] and not (tmp_path / "hosts/vm/nvidia-smi-q.xml").exists()
    kept = (tmp_path / files[0]).read_text()
    assert host_nvsmi.parse_text(kept) == host_nvsmi.parse_text((HOST / "nvidia-smi-q.txt").read_text())
    assert is_cut_line(kept.splitlines()[-1]) and "nvidia-smi-q.txt left out" not in str(runs)
    # wording is the behaviour: the run's entry names the file and the cap that left it out
    assert runs["xml"]["left_out"].startswith("nvidia-smi-q.xml left out (per-host cap of 1 MiB")
    assert parent.used == len(kept.encode()) and any("nvidia-smi-q.xml: not copied" in c for c in parent.cuts)


def test_a_json_host_file_past_the_cap_is_left_out_whole_and_the_record_says_so(tmp_path):
    """A real sysfs-shaped tree built here: 300 RDMA devices of 2 ports, each port with 40 counters."""
    sysfs = tmp_path / "sys"
    for d in range(300):
        for p in (1, 2):
            port = sysfs / f"class/infiniband/mlx5_{d}/ports/{p}"
            (port / "counters").mkdir(parents=True)
            (port / "state").write_text("4: ACTIVE\n")
            for c in range(40):
                (port / "counters" / f"counter_{c}").write_text(f"{c * d}\n")
    target, parent = _target(tmp_path / "b", 256 << 10)
    record = InfinibandCollector(sysfs).collect(target, CollectOptions())
    assert record.status == "skipped" and not record.files
    # wording is the behaviour: the record names the file and the cap that left it out
    assert record.error == "infiniband.json left out (per-host cap of 262144 bytes reached)"
    assert parent.used == 0 and parent.cuts[0].startswith("vm infiniband.json: not copied (")
    small, _ = _target(tmp_path / "c", 1 * MiB)
    whole = InfinibandCollector(sysfs).collect(small, CollectOptions())
    assert whole.status == "ok" and len(json.loads((tmp_path / "c" / whole.files[0]).read_text())["devices"]) == 300
    assert save_json(small, "x.json", {"a": "b" * (2 * MiB)}) is None  # what is left is less than the file


def test_the_host_files_share_one_cap_and_draw_on_the_collections(tmp_path):
    """Files are charged in order: once the host's bytes are spent a later file is left out, and the collection's
    cap, when nearer, is the one said."""
    target, parent = _target(tmp_path, 1 * MiB, total=600 << 10)
    first = save_text(target, "a.txt", "line\n" * 100_000)  # 500,000 bytes: whole
    second = save_text(target, "b.txt", "line\n" * 100_000)  # cut to what the collection has left
    assert first and second and parent.used <= 600 << 10
    assert "per-collection cap of 614400 bytes" in parent.cuts[0]  # wording is the behaviour: the nearer cap named
    assert save_text(target, "c.txt", "line\n") is None and not (tmp_path / "hosts/vm/c.txt").exists()


def test_write_within_by_lines_of_a_single_line_longer_than_the_room_keeps_only_the_cut_line(tmp_path):
    budget = ByteBudget(200, "per-host")
    written, cut = write_within(budget, tmp_path / "f", b"y" * 1000, "f", lines="first")
    assert written and is_cut_line((tmp_path / "f").read_text()) and cut.startswith("f: cut to ")
    assert cut_bytes([(tmp_path / "f").read_text()]) == 1000 and budget.used == (tmp_path / "f").stat().st_size


def test_a_host_digest_past_the_host_cap_is_not_written_and_said(tmp_path):
    """The real bundle's host digest, written through collect's per-host writer: whole when it fits, not at all
    (and said) when the host's bytes left are fewer."""
    bundle = tmp_path / "b"
    shutil.copytree(HOST.parent.parent, bundle)
    (bundle / "hosts/vm" / DIGEST_NAME).unlink(missing_ok=True)

    class _Root:  # write_host_digest reads only the bundle's root folder from its writer
        root = bundle

    small = ByteBudget(2000, "per-host")
    note = write_host_digest(_Root, "vm", _within(small, "vm"))
    # wording is the behaviour: the manifest's note says the digest was left out, and by which cap
    assert note.startswith("host digest not written (vm digest.json: not copied (") and "per-host cap" in note
    assert not (bundle / "hosts/vm" / DIGEST_NAME).exists() and small.used == 0
    roomy = ByteBudget(64 * MiB, "per-host")
    assert write_host_digest(_Root, "vm", _within(roomy, "vm")) is None
    path = bundle / "hosts/vm" / DIGEST_NAME
    assert read_digest(path).host == "vm" and roomy.used == path.stat().st_size


@pytest.mark.integration
def test_collect_keeps_every_host_file_within_a_small_host_cap_and_says_what_it_cut(tmp_path):
    """A real collection of a real rank with --host-max-mib's cap at 3,000 bytes: the host's folder holds no more,
    the manifest's note names the per-host cap, and the rank's own files are not cut by it."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        time.sleep(0.3)
        result = collect_local(tmp_path / "b", CollectOptions(host_bytes=3000, second_look=0), pids=[target.pid],
                               quiet=True)
    finally:
        target.kill()
        target.wait()
    man = result.writer.manifest
    host_dir = tmp_path / "b" / man.hosts[0].dir
    host_files = [p for p in host_dir.iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in host_files) <= 3000
    notes = " ".join(man.notes)
    # wording is the behaviour: the manifest's note names the per-host cap and the digest it left out
    assert "per host 0 MiB" not in notes and "per-host cap of 3000 bytes" in notes
    assert not (host_dir / DIGEST_NAME).exists() and "host digest not written" in notes  # wording is the behaviour
    rank = man.ranks[0]
    assert all(c.status != "skipped" or "per-host" not in (c.error or "") for c in rank.collectors)


@pytest.mark.parametrize("mib", ["0", "-3", str((1 << 30) + 1)])
def test_collect_refuses_a_host_cap_that_is_not_a_whole_positive_number_of_mib(tmp_path, mib):
    done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--pid", str(os.getpid()), "--host-max-mib",
                           mib, "-o", str(tmp_path / "b"), "-q"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--host-max-mib" in done.stderr and not (tmp_path / "b").exists()
