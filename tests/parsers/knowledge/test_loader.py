"""Loading user knowledge: extension, override, and clear errors for every kind of mistake."""

from __future__ import annotations

import textwrap

import pytest

from parsers import knowledge

GOOD = """
[[entry]]
id = "site-lustre-evict"
title = "Lustre client evicted"
kind = "line"
streams = ["kernel"]
pattern = 'LustreError: .* evicted'
meaning = "The Lustre server evicted this client; file operations fail."
severity = "error"
action = "exclude-host-and-restart"
host = "suspect"
examples = ["LustreError: 167-0: scratch-OST0003-osc: This client was evicted by scratch-OST0003"]
counter_examples = ["Lustre: Mounted scratch-client"]
example_sources = ["site runbook"]
"""


def write(tmp_path, text, name="site.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_user_file_from_env_adds_an_entry(tmp_path, monkeypatch):
    monkeypatch.setenv(knowledge.ENV_VAR, str(write(tmp_path, GOOD)))
    kb = knowledge.load()
    assert kb.get("site-lustre-evict") is not None
    assert len(kb) == len(knowledge.load(use_env=False)) + 1
    hits = kb.match_line("LustreError: 167-0: scratch-OST0003-osc: This client was evicted by scratch-OST0003",
                         "kernel")
    assert [e.id for e, _ in hits] == ["site-lustre-evict"]


def test_user_entry_with_a_shipped_id_replaces_it(tmp_path):
    override = GOOD.replace('"site-lustre-evict"', '"xid-13"')
    kb = knowledge.load(extra=[write(tmp_path, override)], use_env=False)
    assert kb.get("xid-13").title == "Lustre client evicted"
    assert len(kb) == len(knowledge.load(use_env=False))


def test_folder_of_user_files(tmp_path):
    write(tmp_path, GOOD, "a.toml")
    write(tmp_path, GOOD.replace("site-lustre-evict", "site-two"), "b.toml")
    kb = knowledge.load(extra=[tmp_path], use_env=False)
    assert kb.get("site-lustre-evict") and kb.get("site-two")


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda t: t.replace("pattern = 'LustreError: .* evicted'", "pattern = 'Lustre(Error'"), "bad pattern"),
        (lambda t: t.replace('examples = ["LustreError', 'examples = ["Lustre warning'), "example does not match"),
        (lambda t: t.replace('counter_examples = ["Lustre: Mounted scratch-client"]',
                             'counter_examples = ["LustreError: x evicted"]'), "counter-example matches"),
        (lambda t: t.replace('severity = "error"', 'severity = "bad"'), "severity 'bad' is not one of"),
        (lambda t: t.replace('action = "exclude-host-and-restart"', 'action = "reboot"'),
         "action 'reboot' is not one of"),
        (lambda t: t.replace('meaning = "The Lustre server evicted this client; file operations fail."\n', ""),
         "missing field(s) meaning"),
        (lambda t: t.replace('streams = ["kernel"]', 'streams = ["syslog"]'), "unknown stream"),
        (lambda t: t + "\n[[entry\n", "not valid TOML"),
    ],
)
def test_broken_user_entries_fail_loudly_naming_file_and_entry(tmp_path, change, message):
    path = write(tmp_path, change(GOOD))
    with pytest.raises(knowledge.KnowledgeError) as err:
        knowledge.load(extra=[path], use_env=False)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_duplicate_id_inside_one_location_is_refused(tmp_path):
    path = write(tmp_path, GOOD + GOOD)
    with pytest.raises(knowledge.KnowledgeError, match="also defined"):
        knowledge.load(extra=[path], use_env=False)


def test_missing_user_path_is_an_error(tmp_path):
    with pytest.raises(knowledge.KnowledgeError, match="no such knowledge-base file"):
        knowledge.load(extra=[tmp_path / "nope.toml"], use_env=False)


def test_value_entry_compares_with_another_fact_and_ignores_wrong_types():
    kb = knowledge.load(use_env=False)
    found = kb.match_facts("gpu X", {"pcie.width.current": 8, "pcie.width.max": 16, "pcie.gen.current": "N/A"})
    assert [f.entry.id for f in found] == ["gpu-pcie-width-degraded"]
    assert found[0].evidence == "pcie.width.current = 8 (< pcie.width.max = 16)"
    assert kb.match_facts("gpu X", {"ecc.volatile.dram.uncorrectable": "N/A"}) == []


def test_a_role_is_one_the_loader_knows(tmp_path):
    """'symptom' marks a line that follows another error (said, never acted on); an unknown role is refused."""
    kb = knowledge.load(extra=[write(tmp_path, GOOD.replace('host = "suspect"', 'host = "none"\nrole = "symptom"'))],
                        use_env=False)
    entry = kb.get("site-lustre-evict")
    assert entry.role == "symptom" and not entry.is_cause
    with pytest.raises(knowledge.KnowledgeError, match="role"):
        knowledge.load(extra=[write(tmp_path, GOOD.replace('host = "suspect"', 'host = "none"\nrole = "cause"'),
                                    "bad.toml")], use_env=False)
