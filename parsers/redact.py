"""The one redaction rule set: secrets out of environments, argv and copied text.

Bundles travel: they get attached to tickets and pasted into chat. A rank's
environment, its command line and its output routinely hold credentials, so every
one of them goes through these rules before it is written into a bundle:

- names: an environment variable whose name says it holds a secret (a `_`-separated
  part like PASS*, *KEY, *KEYS, TOKEN*, SECRET*, DSN, CREDENTIAL*, AUTH*, COOKIE*,
  SESSION*, PRIVATE*, SIGNATURE, WEBHOOK, PWD) has its whole value replaced;
- values, wherever they appear (any env value, any argv element, any log line):
  URL user-info (`scheme://user:pw@host`, `redis://:pw@host`, a password that itself
  holds '@', a bare token as user), `Key=value;` connection strings (Azure
  AccountKey=, SharedAccessKey=, Password=), signed-URL query parameters
  (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, X-Goog-Signature, sig,
  token, access_token), Slack/Discord webhook paths, `--api-key=`/`--token=`/
  `--password ...` options, `NAME_TOKEN=value` assignments inside other text,
  `Authorization: Bearer ...`, and well-known token shapes (GitHub, Slack, AWS key
  ids, Hugging Face, OpenAI-style `sk-`, JWTs, PEM private keys).

Everything is linear-time regular expressions (no nested quantifiers), so a hostile
60 KB line costs milliseconds. Pure, and ground floor (nothing above parsers/).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

REDACTED = "<redacted>"

#: environment names kept verbatim although a rule would match them (config, not secrets)
KEEP_NAMES = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY", "KEYTIMEOUT"})

_NAME_PART = re.compile(
    r"^(?:PASS\w*|\w*PASSWORD|\w*PASSWD|\w*KEYS?|TOKENS?|\w*TOKEN|SECRETS?|\w*SECRET|DSN|\w*DSN|CREDENTIALS?|CREDS?|"
    r"AUTH\w*|COOKIES?|SESSION\w*|PRIVATE|SIGNATURE|SIG|WEBHOOK\w*|PWD|PASSPHRASE|CONNSTR|CONNECTIONSTRING)$",
    re.I)

# scheme://authority: the user-info ends at the LAST '@' of the authority, so a
# password holding '@' is hidden whole (the authority stops at / ? # or blanks).
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://)(?P<auth>[^\s/?#'\"<>]{1,2048})")
_KV_CONN = re.compile(
    r"(?i)\b(AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd|SharedSecret|ClientSecret|Sig)=([^;\s'\"&]+)")
_QUERY = re.compile(
    r"(?i)([?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential|"
    r"Signature|sig|token|access_token|id_token|refresh_token|api_key|apikey|key|password|secret)=)([^&\s'\"#]+)")
_WEBHOOK = re.compile(
    r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/)[^\s'\"<>]+")
_FLAG_WORD = r"[A-Za-z0-9_-]{0,40}(?:key|token|secret|passw(?:or)?d|pass|credentials?|auth|dsn|cookie|signature)[A-Za-z0-9_-]{0,40}"
_FLAG = re.compile(r"(?i)(?<![\w-])(--?" + _FLAG_WORD + r")(=|[ \t]+)(?!-)([^\s'\"]+)")
_ASSIGN = re.compile(
    r"(?i)\b([A-Z0-9_]{0,60}(?:PASS|PASSWORD|PASSWD|SECRET|TOKEN|_KEY|APIKEY|DSN|CREDENTIALS?)[A-Z0-9_]{0,60})=([^\s;&'\"]+)")
_BEARER = re.compile(r"(?i)(\bAuthorization\s{0,8}[:=]\s{0,8}(?:Bearer\s+|Basic\s+|Token\s+)?|\bBearer\s+)([A-Za-z0-9._~+/=-]{8,})")
_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255}|xox[abposr]-[A-Za-z0-9-]{10,255}|"
    r"(?:AKIA|ASIA)[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,255}|sk-[A-Za-z0-9_-]{20,255}|"
    r"eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,4096}|glpat-[A-Za-z0-9_-]{20})")
_PEM = re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----.{0,65536}?(?:-----END [A-Z ]{0,40}PRIVATE KEY-----|\Z)", re.S)


def secret_name(name: str) -> bool:
    """True when an environment variable's name says its value is a secret."""
    if name in KEEP_NAMES:
        return False
    parts = [p for p in re.split(r"[_.\-]+", name) if p]
    return any(_NAME_PART.match(p) for p in parts)


def _url(match: re.Match) -> str:
    scheme, auth = match.group("scheme"), match.group("auth")
    at = auth.rfind("@")
    if at < 0:
        return match.group(0)
    userinfo, hostport = auth[:at], auth[at + 1:]
    user, colon, _ = userinfo.partition(":")
    if colon:
        return f"{scheme}{user}:{REDACTED}@{hostport}"
    return f"{scheme}{REDACTED}@{hostport}"  # a bare token as user name (Sentry DSNs, git tokens)


#: cheap lower-case literals, one of which every rule above needs; a line with none is left as is
_TRIGGERS = ("://", "key", "pass", "pwd", "token", "secret", "sig", "auth", "bearer", "dsn", "cred", "cookie",
             "hooks.", "webhook", "eyj", "gh", "github_pat", "xox", "akia", "asia", "hf_", "sk-", "glpat")


def _redact_line(text: str) -> str:
    """All single-line rules, in an order where an earlier rule cannot hide a later one's anchor."""
    text = _URL.sub(_url, text)
    text = _WEBHOOK.sub(lambda m: m.group(1) + REDACTED, text)
    text = _QUERY.sub(lambda m: m.group(1) + REDACTED, text)
    text = _KV_CONN.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    text = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _ASSIGN.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return _SHAPES.sub(REDACTED, text)


def redact_text(text: str) -> str:
    """`text` with every secret shape the rules know replaced by <redacted>.

    Lines without any trigger literal are kept without running a regular expression:
    8 MB of real NCCL/kernel logs cost well under a second that way.
    """
    if not text:
        return text
    if "-----BEGIN" in text:
        text = _PEM.sub(REDACTED, text)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        low = line.lower()
        if any(t in low for t in _TRIGGERS):
            lines[i] = _redact_line(line)
    return "\n".join(lines)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of an environment: secret-named values replaced whole, other values scrubbed."""
    return {key: REDACTED if secret_name(key) else redact_text(value) for key, value in env.items()}


def _flag_takes_next(arg: str) -> bool:
    """`--token` / `-p`-style option given alone, whose value is the next argv element."""
    return bool(re.fullmatch(r"--?" + _FLAG_WORD, arg, re.I))


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secrets hidden: `--token=x`, `--token x`, and any secret shape inside an element."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = _flag_takes_next(arg)
        out.append(redact_text(arg))
    return out


def redact_lines(lines: Iterable[str]) -> list[str]:
    """redact_text over lines (logs)."""
    return [redact_text(line) for line in lines]
