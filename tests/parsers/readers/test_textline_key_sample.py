"""Issue 40 item 8: the sample of unread lines (parsers/readers/textline.note_unknown), which analyze's text and
JSON quote, never holds a line of a key block. Reproducer: a loose folder whose log holds an OpenSSH private key
(a log tail that starts inside one too, and PEM, PGP and PuTTY forms), analysed as text and --json."""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import REPO
from parsers.readers.textline import KEY_LINE_SAMPLE

B64 = string.ascii_letters + string.digits + "+/"


def _body(seed: int, rows: int = 5) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(B64) for _ in range(64 + seed % 7)) for _ in range(rows)]


def _blocks() -> dict[str, list[str]]:
    ssh = _body(1)
    return {
        "openssh": ["-----BEGIN OPENSSH PRIVATE KEY-----", *ssh, "-----END OPENSSH PRIVATE KEY-----"],
        "tail-inside": [*_body(2, 3), "-----END RSA PRIVATE KEY-----"],
        "pem-encrypted": ["-----BEGIN ENCRYPTED PRIVATE KEY-----", *_body(3), "-----END ENCRYPTED PRIVATE KEY-----"],
        "pgp": ["-----BEGIN PGP PRIVATE KEY BLOCK-----", "", *_body(4), "-----END PGP PRIVATE KEY BLOCK-----"],
        "putty": ["PuTTY-User-Key-File-3: ssh-ed25519", "Private-Lines: 1", *_body(5, 1), "Private-MAC: " + "ab" * 32],
    }


@pytest.mark.parametrize("kind", sorted(_blocks()))
def test_unread_sample_never_quotes_a_key_line(tmp_path: Path, kind: str):
    lines = _blocks()[kind]
    log = ["node1:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", *lines,
           "node1:100:100 [0] NCCL INFO comm 0x55d1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]
    (tmp_path / "rank0.log").write_text("\n".join(log) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    outs = [subprocess.run([sys.executable, "-m", "forensics", "analyze", str(tmp_path), *extra], capture_output=True,
                           text=True, env=env, timeout=120) for extra in ([], ["--json"])]
    text = "\n".join(o.stdout + o.stderr for o in outs)
    assert "Traceback" not in text
    assert KEY_LINE_SAMPLE in text  # the lines were sampled (else no quote could show)
    secret = [line for line in lines if len(line) >= 24 and "-----" not in line and ":" not in line]
    assert secret and not [line for line in secret if line in text]
