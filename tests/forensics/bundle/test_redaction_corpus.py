"""Item 8 of issue 31: a corpus of named secret shapes across env, argv, stdout/stderr and NCCL
logs (tests/fixtures/redaction/corpus.json), with 0 leaks, and non-secret controls
(controls.json) that must come out unchanged, so over-redaction is caught too.

Each corpus entry: name, channel (env | argv | stdout | stderr | nccl), input, the secret
values that must not survive, and substrings around them that must (the context a reader
needs). Shapes follow the documented formats of each key or token; the values are random.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.bundle.redact import REDACTED, redact_argv, redact_env, redact_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "redaction"
CORPUS = json.loads((FIXTURES / "corpus.json").read_text())
CONTROLS = json.loads((FIXTURES / "controls.json").read_text())

#: the probe's leaks (issue 31) and the scanner families, each of which the corpus must hold
REQUIRED = [
    "url-password-with-slash-and-hash", "url-password-with-hash-argv", "quoted-assignment-single",
    "quoted-assignment-with-space", "spaced-aws-secret-access-key", "yaml-password", "json-token",
    "argv-password-quoted-in-shell-string", "argv-sshpass-p", "argv-curl-u-user-colon", "header-x-api-key",
    "basic-auth-header", "basic-auth-bare", "wandb-login-text", "wandb-login-argv", "pgp-private-key-block",
    "sshpass-env", "shape-aws-access-key-id", "shape-gcp-api-key", "shape-azure-ad-client-secret",
    "azure-storage-connection-string", "shape-github-pat-classic", "shape-gitlab-pat", "shape-slack-bot-token",
    "shape-huggingface-token", "shape-openai-key", "env-name-WANDB_API_KEY", "shape-jwt", "authorization-bearer",
    "key-block-rsa-private-key", "key-block-openssh-private-key", "key-block-ec-private-key",
    "mongodb-srv-url", "python-dict-repr",
]


def _apply(entry: dict) -> str:
    """The channel's redaction, flattened to one text to search."""
    channel, data = entry["channel"], entry["input"]
    if channel == "env":
        return "\n".join(f"{k}={v}" for k, v in redact_env(data).items())
    if channel == "argv":
        return "\n".join(redact_argv(data))
    assert channel in ("stdout", "stderr", "nccl"), channel
    return redact_text(data)


def test_corpus_is_large_named_and_covers_every_shape():
    names = [e["name"] for e in CORPUS]
    assert len(CORPUS) >= 100
    assert len(set(names)) == len(names)
    assert not [n for n in REQUIRED if n not in names]
    assert {e["channel"] for e in CORPUS} == {"env", "argv", "stdout", "stderr", "nccl"}
    for entry in CORPUS:  # each planted value is really in its input
        flat = json.dumps(entry["input"]) if entry["channel"] != "stdout" else entry["input"]
        for secret in entry["secrets"]:
            assert secret and (secret in flat or json.dumps(secret)[1:-1] in flat), entry["name"]


@pytest.mark.parametrize("entry", CORPUS, ids=[e["name"] for e in CORPUS])
def test_no_secret_survives(entry):
    out = _apply(entry)
    leaked = [s for s in entry["secrets"] if s in out]
    assert not leaked, f"{entry['name']}: {leaked} in {out!r}"
    assert REDACTED in out
    for kept in entry["keep"]:
        assert kept in out, f"{entry['name']}: over-redacted, {kept!r} missing from {out!r}"


def test_leak_count_is_zero():
    """The figure reported for issue 31: planted values that survive, over the whole corpus."""
    leaks = sum(1 for e in CORPUS for s in e["secrets"] if s in _apply(e))
    assert leaks == 0


@pytest.mark.parametrize("entry", CONTROLS, ids=[e["name"] for e in CONTROLS])
def test_controls_are_not_redacted(entry):
    data = entry["input"]
    if entry["channel"] == "env":
        assert redact_env(data) == data
    elif entry["channel"] == "argv":
        assert redact_argv(data) == data
    else:
        assert redact_text(data) == data


ADVERSARIAL = ["key=", "a_key ", "password: ", "--token ", "x://", "@", "eyJa.", "-----END RSA PRIVATE KEY-----\n",
               "Basic QUJD", "sshpass ", "curl -u a:", "wandb login --x ", "Private-Lines: 3\n",
               "set by environment to ", "Bearer ", "'password'", '"token":"', "mysql -p", "Q~",
               "aws configure set secret "]


@pytest.mark.parametrize("piece", ADVERSARIAL)
def test_adversarial_110kb_lines_are_linear(piece):
    """Every rule on a 110 KB line built to make it backtrack: well under a second each here."""
    import time

    line = "token " + piece * (110_000 // len(piece))
    start = time.monotonic()
    redact_text(line)
    redact_argv([line, "--password", line])
    assert time.monotonic() - start < 3.0


def test_many_distinct_trigger_lines_stay_linear():
    """A log of nothing but distinct lines that each trip a rule (2 MB): every line goes through the
    rules, none is skipped; a few seconds at most here (about 1 microsecond per byte)."""
    import time

    text = "".join(f"key={i} api_key: v{i}\n" for i in range(90_000))
    start = time.monotonic()
    out = redact_text(text)
    assert time.monotonic() - start < 20.0
    assert "v123 " not in out and out.count(REDACTED) == 90_000


def test_manifest_command_is_redacted(tmp_path):
    """forensics' own argv is stored in the manifest too (`command`): it goes through the same rules."""
    from forensics.bundle.writer import BundleWriter

    token = "hf_" + "Q" * 34
    writer = BundleWriter(tmp_path / "b", ["forensics", "collect", "--match-env", f"HF_TOKEN={token}"])
    writer.save()
    assert token not in (tmp_path / "b" / "manifest.json").read_text()
    assert writer.manifest.command[:3] == ["forensics", "collect", "--match-env"]
