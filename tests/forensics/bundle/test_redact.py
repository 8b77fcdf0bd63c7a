"""Item 6 of issue 16: one rule set; every leak the probe found, shape by shape.

The shapes follow the documented formats: Azure storage connection strings
(https://learn.microsoft.com/azure/storage/common/storage-configure-connection-string),
Redis URLs (https://www.iana.org/assignments/uri-schemes/prov/redis), Slack incoming
webhooks (https://api.slack.com/messaging/webhooks), S3 presigned URLs
(https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html),
Sentry DSNs (https://docs.sentry.io/concepts/key-terms/dsn-explainer/).
"""

from __future__ import annotations

import glob
import time
from pathlib import Path

import pytest

from forensics.collectors.environment import redact as collector_redact
from forensics.bundle.redact import REDACTED, redact_argv, redact_env, redact_text, secret_name

SECRET = "S3cr3tValue42"


@pytest.mark.parametrize("name", ["DB_PASS", "KAGGLE_KEY", "ENCRYPTION_KEY", "SENTRY_DSN", "HF_TOKEN",
                                  "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "DB_PASSWORD", "MYSQL_PWD",
                                  "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "SSH_PRIVATE_KEY",
                                  "SLACK_WEBHOOK_URL", "GITHUB_TOKENS", "API_KEYS", "SESSION_COOKIE", "AUTH_HEADER"])
def test_secret_names(name):
    assert secret_name(name)
    assert redact_env({name: SECRET}) == {name: REDACTED}


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "NCCL_DEBUG_FILE", "TORCH_FR_DUMP_TEMP_FILE", "PWD", "OLDPWD",
                                  "MASTER_ADDR", "WORLD_SIZE", "KEYBOARD_LAYOUT", "KEYTIMEOUT", "PATH",
                                  "SSH_AUTH_SOCK"])
def test_config_names_kept(name):
    assert not secret_name(name)


@pytest.mark.parametrize("value, kept", [
    (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET}==;EndpointSuffix=core.windows.net",
     "AccountName=acct"),
    (f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={SECRET}",
     "SharedAccessKeyName=root"),
    (f"redis://:{SECRET}@cache.internal:6379/0", "cache.internal:6379"),
    (f"postgres://bob:p@ss@{SECRET}@db.example.com:5432/app", "bob:<redacted>@db.example.com:5432"),
    (f"https://{SECRET}@o12345.ingest.sentry.io/678", "o12345.ingest.sentry.io/678"),
    (f"https://hooks.slack.com/services/T0001/B0002/{SECRET}", "hooks.slack.com/services/"),
    (f"https://b.s3.amazonaws.com/k.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240101"
     f"&X-Amz-Signature={SECRET}&X-Amz-Security-Token={SECRET}", "X-Amz-Algorithm=AWS4-HMAC-SHA256"),
    (f"--lr 0.1 --api-key={SECRET} --epochs 3", "--epochs 3"),
    (f"--token {SECRET} --name run1", "--name run1"),
    (f"export WANDB_API_KEY={SECRET}; python train.py", "python train.py"),
    (f"Authorization: Bearer {SECRET}", "Authorization: Bearer"),
    ("ghp_" + "a1" * 18, ""), ("hf_" + "Q" * 34, ""), ("AKIA" + "ABCDEFGHIJKLMNOP", ""),
    ("xoxb-1234567890-abcdefghij", ""),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", ""),
])
def test_value_shapes(value, kept):
    out = redact_text(value)
    assert SECRET not in out and REDACTED in out
    assert kept in out
    assert redact_env({"SOME_VAR": value})["SOME_VAR"] == out  # values of any variable are scrubbed too


def test_password_with_at_is_hidden_whole():
    out = redact_text("mysql://app:p@ss@w@rd@db:3306/x")
    assert out == f"mysql://app:{REDACTED}@db:3306/x"


def test_pem_block():
    text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA PRIVATE KEY-----\nafter"
    assert redact_text(text) == f"before\n{REDACTED}\nafter"


def test_argv():
    argv = ["python", "train.py", f"--api-key={SECRET}", "--token", SECRET, "--hf-token", SECRET,
            "--lr", "0.1", f"--db=postgres://u:{SECRET}@h/db", "--password", "--next"]
    out = redact_argv(argv)
    assert SECRET not in " ".join(out)
    assert out[:3] == ["python", "train.py", f"--api-key={REDACTED}"] and out[7:9] == ["--lr", "0.1"]
    assert out[-1] == "--next"


def test_collector_uses_the_same_rules():
    env = {"DB_PASS": SECRET, "PROXY": f"http://u:{SECRET}@proxy:3128", "NCCL_DEBUG": "INFO"}
    assert collector_redact(env) == redact_env(env)


def test_real_logs_unchanged_and_fast():
    """The rules leave real NCCL/PyTorch/kernel logs as they were, at log speed."""
    root = Path(__file__).resolve().parents[2] / "fixtures"
    files = sorted(glob.glob(f"{root}/**/*.log", recursive=True) + glob.glob(f"{root}/**/*.txt", recursive=True))
    text = "\n".join(Path(f).read_text(errors="replace") for f in files)
    assert len(text) > 1_000_000
    start = time.monotonic()
    out = redact_text(text)
    seconds = time.monotonic() - start
    assert out == text
    assert seconds < 10 * len(text) / 26e6 + 1  # ~2.5 s for the 26 MB measured here


def test_hostile_line_is_linear():
    for piece in ("a", "--key ", "x://", "@", "eyJ", "A_KEY=", "?sig=", "-----BEGIN PRIVATE KEY-----"):
        line = piece * (60_000 // len(piece))
        start = time.monotonic()
        redact_text(line)
        assert time.monotonic() - start < 1.0, piece
