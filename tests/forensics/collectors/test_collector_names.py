"""The registry is the one place that knows the collectors' file names (issue 29, item 4).

Collectors ask parsers.gather.registry for their names (collector_file, collector_folder); these tests check
that no collector writes a name of its own, that the bundles our collectors wrote on real jobs (gloo here,
NCCL on the H200) hold only declared names, and that a collector's earlier name still reads."""

from __future__ import annotations

import ast
import json

import pytest

from forensics.collectors import host_collectors, rank_collectors
from hf_testpaths import FIXTURES, REPO
from parsers.gather import registry
from parsers.gather.source import open_source

#: every exact file name the registry declares (patterns aside)
EXACT = {n for k in registry.KINDS for n in k.names if not any(c in n for c in "*?[")}
#: where collectors and what names their files live
COLLECTOR_CODE = [*(REPO / "forensics" / "collectors").glob("*.py"), *(REPO / "forensics" / "collect").glob("*.py"),
                  REPO / "forensics" / "discover" / "outputs.py"]


def _manifest_files(data: dict) -> list[tuple[str, str]]:
    """(collector, bundle path) of every file a manifest's collectors wrote: ranks, their children, hosts."""
    out = []
    records = [c for r in data.get("ranks", []) for c in r.get("collectors", [])]
    records += [c for r in data.get("ranks", []) for kid in r.get("children") or [] for c in kid.get("collectors", [])]
    records += [c for h in data.get("hosts", []) for c in h.get("collectors", [])]
    for col in records:
        out += [(col["name"], rel) for rel in col.get("files", [])]
    return out


def test_every_collector_is_known_to_the_registry():
    for collector in [*rank_collectors(), *host_collectors()]:
        assert registry.for_collector(collector.name), f"{collector.name}: no kind in parsers.gather.registry.KINDS"


def test_no_collector_spells_a_declared_file_name_itself():
    """A string equal to a declared name in collector code is a name the registry does not control,
    unless it is the name asked of collector_file (a kind of several files)."""
    found = []
    for path in COLLECTOR_CODE:
        tree = ast.parse(path.read_text())
        asked = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "id",
                             getattr(node.func, "attr", None)) in ("collector_file", "_rank_log") for arg in node.args}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in asked:
                if node.value in EXACT or node.value.rsplit("/", 1)[-1] in EXACT - {"manifest.json"}:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert found == []


def test_the_registry_refuses_what_a_collector_does_not_write():
    assert registry.collector_file("gdb", "gdb-json") == "gdb.json"
    assert registry.collector_file("ras", "ras-json", "ras_status_later.json") == "ras_status_later.json"
    assert registry.collector_folder("recorder", "recorder-state") == "recorder"
    with pytest.raises(KeyError):
        registry.collector_file("gdb", "pyspy-json")  # another collector's kind
    with pytest.raises(KeyError):
        registry.collector_file("ras", "ras-json", "ras_status.txt")  # a name of the kind's sibling
    with pytest.raises(KeyError):
        registry.collector_folder("gdb", "gdb-json")  # gdb names its file, it copies none
    assert registry.declares("stdio", "ranks/3/2.stdout.log")  # a second file of one name (unique_name)
    assert not registry.declares("stdio", "ranks/3/gdb.json")


def test_every_file_in_the_bundles_our_collectors_wrote_is_declared():
    """The bundle fixtures were collected by our collectors from real jobs (gloo here, NCCL on the H200)."""
    manifests = sorted(FIXTURES.rglob("manifest.json"))
    checked, undeclared = set(), []
    for man in manifests:
        data = json.loads(man.read_text())
        if data.get("format") != "hang-forensics-bundle":
            continue
        for collector, rel in _manifest_files(data):
            checked.add(registry.collector_name(collector))
            if not registry.declares(collector, rel):
                undeclared.append(f"{man.relative_to(FIXTURES)}: {collector} wrote {rel}")
    assert undeclared == []
    # the check saw the collectors that matter, the recorder's under its earlier name among them
    assert {"process_state", "environment", "stdio", "py-spy", "nccl_log", "flight_recorder", "recorder",
            "nvidia_smi", "kernel_log"} <= checked, checked


def test_a_bundle_written_under_the_recorders_earlier_name_reads_as_the_recorder():
    """nccl/sigstop was collected when the collector was called nccl_recorder: its files still read as the
    recorder's, under the name it has now."""
    bundle = FIXTURES / "nccl" / "sigstop" / "bundle"
    names = {c["name"] for r in json.loads((bundle / "manifest.json").read_text())["ranks"] for c in r["collectors"]}
    assert "nccl_recorder" in names and "recorder" not in names
    with open_source(bundle) as src:
        hinted = {ref.rel: ref.hints.collector for ref in src.files if ref.rel.endswith(".bin")}
    assert hinted and set(hinted.values()) == {"recorder"}, hinted
