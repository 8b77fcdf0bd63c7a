"""Every knowledge-base entry: well formed, its real examples match, its counter-examples do not.

The loader already refuses entries whose examples fail; these tests make each
entry visible as its own test case, and check the shipped real-log fixtures
produce exactly the entries their '# expect:' lines name.
"""

from __future__ import annotations

import pytest

from parsers import knowledge
from kbtest_helpers import FIXTURES, blocks

KB = knowledge.load(use_env=False)
ENTRIES = {e.id: e for e in KB.entries}
KERNEL_FIXTURES = sorted((FIXTURES / "kernel").glob("*.log"))
RANK_FIXTURES = sorted((FIXTURES / "ranklogs").glob("*.log"))
#: Line entries whose example is adapted from a neighbouring real line (no public paste found); see
#: docs/knowledge-base.md.
ADAPTED = {"xid-61", "xid-92", "xid-95", "edac-uncorrected"}


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_entry_is_well_formed(entry_id):
    entry = ENTRIES[entry_id]
    assert entry.severity in knowledge.SEVERITIES
    assert entry.action in knowledge.ACTIONS
    assert entry.host in knowledge.HOST_EFFECTS
    assert entry.meaning.strip() and entry.title.strip()
    assert entry.examples and entry.counter_examples, "each entry needs a matching and a non-matching example"
    assert entry.example_sources, "each entry must say where its examples come from"


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_examples_match_and_counter_examples_do_not(entry_id):
    entry = ENTRIES[entry_id]
    for example in entry.examples:
        hit = entry.match_line(example) if entry.kind == "line" else entry.match_facts(example)
        assert hit, f"{entry_id}: example does not match: {example!r}"
    for counter in entry.counter_examples:
        hit = entry.match_line(counter) if entry.kind == "line" else entry.match_facts(counter)
        assert not hit, f"{entry_id}: counter-example matches: {counter!r}"


def _fixture_blocks(paths, stream):
    for path in paths:
        for source, expected, lines in blocks(path):
            yield pytest.param(source, expected, lines, stream, id=f"{path.name}:{lines[0][0] if lines else 0}")


@pytest.mark.parametrize("source,expected,lines,stream",
                         list(_fixture_blocks(KERNEL_FIXTURES,
                                              "kernel")) + list(_fixture_blocks(RANK_FIXTURES, "rank-log")))
def test_real_log_block_gives_exactly_the_expected_entries(source, expected, lines, stream):
    from parsers.readers.host_kernel import split_prefix

    found = set()
    for _, text in lines:
        message = split_prefix(text)[1] if stream == "kernel" else text
        found |= {entry.id for entry, _ in KB.match_line(message, stream)}
    assert found == expected, f"block from {source}"


def test_every_line_entry_is_matched_by_a_real_fixture_line():
    """Coverage: a line entry without a real fixture line must be listed as adapted (and documented)."""
    covered = set()
    for path, stream in [(p, "kernel") for p in KERNEL_FIXTURES] + [(p, "rank-log") for p in RANK_FIXTURES]:
        for _, expected, _ in blocks(path):
            covered |= expected
    line_ids = {e.id for e in KB.entries if e.kind == "line"}
    assert line_ids - covered == ADAPTED - covered
    assert not (ADAPTED & covered), "an adapted entry now has a real line: drop it from ADAPTED"


def test_real_dev_vm_kernel_log_has_only_the_oom_we_caused(kb):
    """The development machine's real dmesg (-T and raw) holds one cgroup OOM kill we provoked, nothing else."""
    from parsers.readers.host_kernel import numbered_messages, read_kernel_log

    for name in ("dev-vm-dmesg-T.log", "dev-vm-dmesg-raw.log"):
        lines = read_kernel_log((FIXTURES / "kernel" / name).read_text())
        found = kb.scan_lines(numbered_messages(lines), "kernel", name)
        assert [f.entry.id for f in found] == ["oom-killer-cgroup"], name
        assert found[0].groups == {"pid": "5320", "comm": "python3"}
