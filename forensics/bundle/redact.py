"""The one redaction rule set: secrets out of environments, argv and copied text.

Bundles travel: they get attached to tickets and pasted into chat. A rank's
environment, its command line and its output routinely hold credentials, so every
one of them goes through these rules before it is written into a bundle:

- names: an environment variable whose name says it holds a secret (a `_`-separated
  part like PASS*, *PASS, *PASSWORD, *KEY(S), TOKEN*, SECRET*, DSN, CREDENTIAL*, AUTH*,
  COOKIE*, SESSION*, PRIVATE*, SIGNATURE, WEBHOOK, JWT, *PWD; CONNECTION_STRING) has its
  whole value replaced;
- key/value text, wherever it appears (env values, argv elements, log lines):
  `password='x y'`, `aws_secret_access_key = x`, YAML `password: x`, JSON and Python dict
  `"token": "x"`, `X-API-Key: x` and other headers, `Authorization: Basic|Bearer|Token x`,
  a bare `Basic <base64 of user:pw>`, `NAME set by environment to x` (NCCL);
- URL user-info (`scheme://user:pw@host`, a password holding '@', '/' or '#', a bare
  token as user), `Key=value;` connection strings, signed-URL query parameters, Slack
  and Discord webhook paths;
- options: `--api-key=x`, `--password 'x y'`, and per program: `sshpass -p x`,
  `mysql -px`, `redis-cli -a x`, `curl -u user:x`, `ldapsearch -w x`, `zip -P x`,
  `openssl ... pass:x`, `wandb login <key>`, `aws configure set <secret> x`;
- key blocks of every kind (PEM, OpenSSH, PGP, PuTTY, age), also when a log tail
  starts inside one (an END line with no BEGIN above it);
- token shapes that carry their own prefix (GitHub, GitLab, Slack, AWS key ids, GCP
  API keys and OAuth tokens, Azure AD client secrets, Hugging Face, OpenAI/Anthropic
  `sk-`, Stripe, npm, PyPI, SendGrid, Databricks, DigitalOcean, Docker, NVIDIA NGC,
  Vault, Groq, Replicate, Atlassian, Shopify, Google OAuth client secrets, JWTs).

A key/value rule only fires on a key that names a secret; words that merely contain one
(`tokens/s`, `max_new_tokens`, `eos_token`, `--tokenizer`, `keyboard`) are left alone, so
real NCCL/PyTorch logs come out unchanged (tests/unit/harden/test_redact.py).

Everything is linear-time regular expressions (bounded repetitions, no nested
quantifiers), so a hostile 100 KB line costs milliseconds; lines holding none of the
trigger literals and no token shape skip the rules (redact_text finds the others on the
whole text at once). Pure (the standard library only). It sits with the bundle because it is the
bundle's promise, applied as evidence is written: the writer redacts the manifest's command, collectors
what they copy; no reader needs it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import os
import re
from typing import Iterable, Mapping

REDACTED = "<redacted>"

#: environment names kept verbatim although a rule would match them (config, not secrets)
KEEP_NAMES = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY", "KEYTIMEOUT", "SSH_ASKPASS_REQUIRE"})

_NAME_PART = re.compile(
    r"^(?:PASS\w*|\w*PASS|\w*PASSWORD|\w*PASSWD|\w*KEYS?|TOKENS?|\w*TOKEN|SECRETS?|\w*SECRET|DSN|\w*DSN|CREDENTIALS?|"
    r"CREDS?|AUTH\w*|COOKIES?|SESSION\w*|PRIVATE|SIGNATURE|SIG|WEBHOOK\w*|\w*PWD|PASSPHRASE|CONNSTR|"
    r"CONNECTIONSTRING|JWT|SAS|APIKEY|OTP)$",
    re.I)
_NAME_WHOLE = re.compile(r"(?i)CONNECTION_?STRING")
#: a name that holds one of these anywhere (`LDAPPASSWORDX`, `APITOKENVALUE`, `MYCREDS1`) names a secret, as does a
#: `_PW` or `PAT` part (`LDAP_BIND_PW`, `GH_PAT`) (issue 40); _NOT_SECRET_WORDS are the ordinary names that hold them
_NAME_INSIDE = re.compile(r"(?i)PASS|TOKEN|SECRET|KEY|AUTH|CRED")
_NAME_SHORT_PART = re.compile(r"(?i)^(?:\w*PW|PATS?)$")
_NOT_SECRET_WORDS = re.compile(
    r"(?i)AUTHOR|TOKENIZER|BYPASS|COMPASS|PASSTHROUGH|PASSES|KEYBOARD|HOTKEY|MONKEY|TURNKEY|KEYTIMEOUT|"
    r"KEYMAP|KEYRING_BACKEND|NCCL_IB_PKEY|_PKEY\b|SSH_AUTH_SOCK|XAUTHORITY|TOKEN_?(?:LEN|LENGTH|LIMIT|COUNT)S?\b|"
    r"MAX_?TOKENS|KEY_?(?:DIM|SIZE|LEN|LENGTH|COLUMN|FIELD)S?\b")
_NOT_SECRET_PART = re.compile(r"(?i)^(?:BYPASS|COMPASS|PASSTHROUGH|KEYBOARD|MONKEY|HOTKEY|TOKENIZERS?|PASSES"
                              r"|AUTHORS?|PKEY)$")

# --- key/value forms --------------------------------------------------------------------------
# A key names a secret when, read as words, it ENDS in one of these (so `max_new_tokens`,
# `tokenizer`, `key_dim` are not secrets but `hf_token`, `api-key`, `db_pass` are).
_SECRET_WORD = (r"(?:keys?|password|passwd|passphrase|pass|pwd|secret|secrets|token|api[_-]?key|apikey|access[_-]?key|"
                r"secret[_-]?key|private[_-]?key(?:[_-]id)?|account[_-]?key|auth[_-]?key|client[_-]?secret|"
                r"encryption[_-]?key|signing[_-]?key|master[_-]?key|storage[_-]?key|subscription[_-]?key|"
                r"shared[_-]?key|app[_-]?key|credentials?|creds|auth|authorization|dsn|cookie|set-cookie|"
                r"session[_-]?(?:id|key|token)|sessionid|signature|webhook(?:[_-]?url)?|jwt|sshpass|mysql[_-]?pwd|"
                r"pgpassword)")
_LAST_WORDS = frozenset((
    "password", "passwd", "passphrase", "pass", "pwd", "secret", "secrets", "token", "credential", "credentials",
    "creds", "auth", "authorization", "dsn", "cookie", "cookies", "signature", "jwt", "sshpass",
    "pgpassword", "apikey", "sessionid", "webhook", "authtoken", "accesstoken",
    "secretkey", "accesskey", "privatekey", "clientsecret", "apitoken"))
_KEY_QUALIFIERS = frozenset((
    "api", "access", "secret", "private", "account", "auth", "encryption", "signing", "master", "storage",
    "subscription", "shared", "app", "client", "consumer", "license", "ssh", "gpg", "pgp", "deploy", "service",
    "session", "sas", "hmac", "crypt", "decryption", "wandb", "openai", "anthropic", "kaggle", "comet", "ngc"))
#: words before the secret word that make the key a counter or a tokenizer setting, not a secret
_STOP_WORDS = frozenset((
    "pad", "eos", "bos", "unk", "mask", "sep", "cls", "special", "additional", "vocab", "num", "max", "min",
    "total", "first", "last", "next", "prev", "forward", "backward", "sort", "cache", "primary", "partition",
    "hash", "dict", "map", "n", "spin", "fw", "bw", "start", "end", "public", "publishable", "no", "use"))
_WORD_SPLIT = re.compile(r"[_.\-\s]+|(?<=[a-z0-9])(?=[A-Z])")
_KEY = r"[A-Za-z0-9_.-]{0,60}?" + _SECRET_WORD
_KV = re.compile(
    r"(?i)(?<![A-Za-z0-9_.-])(?P<key>[\"']?(?P<name>" + _KEY + r")[\"']?)"
    r"(?P<sep>[ \t]{0,8}(?:=>|[:=])[ \t]{0,8})"
    r"(?P<value>'[^'\n]{1,2048}'|\"(?:[^\"\\\n]|\\.){1,2048}\"|[^\s'\",;}{)\]]{1,2048})")
_EMPTY_VALUES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "''", '""', "none", "null", "nil", "true",
                           "false", "yes", "no", "0", "1", "*", "***",
                           REDACTED.lower(), "[redacted]", "<redacted>", "{", "[", "(", "-"})

# scheme://userinfo@host: the user-info runs to the LAST '@' before a blank or a quote, so a
# password holding '@', '/' or '#' is hidden whole; 'host:443/path/@scope' is a port and a path.
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://)(?P<rest>[^\s'\"<>`]{1,2048})")
_PORT_PATH = re.compile(r"^[^:/@]*:\d{1,5}/")
_KV_CONN = re.compile(
    r"(?i)\b(AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd|SharedSecret|ClientSecret|Sig|"
    r"SecretKey|AccessKey|ApiKey|Token)=(\{[^}\n]{0,1024}\}|[^;\s'\"&]+)")
_QUERY = re.compile(
    r"(?i)([?&;](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential|"
    r"Signature|sig|token|access_token|id_token|refresh_token|api_key|apikey|key|password|pwd|secret|"
    r"client_secret|auth)=)([^&;\s'\"#]+)")
_WEBHOOK = re.compile(
    r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/|"
    r"webhook\.office\.com/webhookb2/)[^\s'\"<>]+")
# --option=value and --option value; the option's last word names a secret
_FLAG_NAME = r"--?(?!no-)(?:[A-Za-z0-9]{1,30}[-_]){0,6}?" + _SECRET_WORD
_FLAG = re.compile(r"(?i)(?<![\w-])(" + _FLAG_NAME + r")(=|[ \t]+)(?!-)"
                   r"('[^'\n]{0,2048}'|\"[^\"\n]{0,2048}\"|[^\s'\"]+)")
_HEADER = re.compile(
    r"(?i)(\b(?:Proxy-)?Authorization[ \t]{0,8}[:=][ \t]{0,8}[\"']?(?:Bearer|Basic|Token|Digest|Negotiate|"
    r"AWS4-HMAC-SHA256|SharedKey|Splunk|ApiKey|Key|OAuth|Bot)?[ \t]{0,8}|\bBearer[ \t]+)([^\s'\",]{6,4096})")
_BASIC = re.compile(r"\bBasic[ \t]+([A-Za-z0-9+/]{8,4096}={0,2})")
# netrc (`machine h login u password X`, or a `password X` line of its own) and `Using token X` (a value with a digit)
_NETRC = re.compile(r"(?i)(\b(?:machine|login|default)\b[^\n]{0,300}?\b(?:password|passwd)[ \t]+|^[ "
                    r"\t]*(?:password|passwd)"
                    r"[ \t]+(?=\S+[ \t]*$))(\S{1,2048})")
_USING_TOKEN = re.compile(r"(?i)(\b(?:using|with|got|received|loaded)[ \t]{1,16}(?:an?[ \t]{1,16}|the[ "
                          r"\t]{1,16})?(?:access[ \t_-]|api[ \t_-]|"
                          r"auth[ \t_-]|bearer[ \t_-]|bot[ \t_-])?token[ \t]{0,16}:?[ "
                          r"\t]{1,16})(?=[^\s'\",;]{0,2047}[0-9])"
                          r"([^\s'\",;]{8,2048})")
_NCCL_ENV = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{0,127}) set by environment to (\S{1,4096})")
# per-program forms, in text (shell strings, printed commands)
_PROGRAM = re.compile(
    r"(?i)(\bsshpass\b[^\n|;&]{0,200}?[ \t]-p[ \t]*|\bmysql(?:dump|admin|import|show|check|slap)?\b[^\n|;&]{0,200}?"
    r"[ \t]-p|\bmariadb(?:-dump|-admin)?\b[^\n|;&]{0,200}?[ \t]-p|\bredis-cli\b[^\n|;&]{0,200}?[ \t]-a[ \t]+|"
    r"\bldap(?:search|modify|add|delete|whoami)\b[^\n|;&]{0,200}?[ \t]-w[ \t]+|\b(?:zip|unzip|sqlcmd|bcp)\b"
    r"[^\n|;&]{0,200}?[ \t]-P[ \t]*|\b7za?\b[^\n|;&]{0,200}?[ \t]-p|\b(?:curl|wget)\b[^\n|;&]{0,200}?"
    r"[ \t](?:-u|--user|--proxy-user)[ \t=]+[\"']?[^\s:'\"]{0,200}:|\bhttps?\b[^\n|;&]{0,200}?[ \t]"
    r"(?:-a|--auth)[ \t=]+[\"']?[^\s:'\"]{0,200}:|\bsmbclient\b[^\n|;&]{0,200}?[ \t]-U[ \t]*[^\s%]{0,200}%|"
    r"\bwandb[ \t]+login(?:[ \t]+--?[A-Za-z-]{1,30}(?:[ \t=]{1,8}[^\s-]\S{0,200})?){0,4}[ \t]+|"
    r"\baws[ \t]+configure[ \t]+set[ \t]+\S{0,80}(?:secret|token|key)\S{0,80}[ \t]+|\bpass:|"
    r"\bdocker[ \t]+login\b[^\n|;&]{0,200}?[ \t]-p[ \t]+)(\"[^\"\n]{1,2048}\"|'[^'\n]{1,2048}'|[^\s'\"]{1,2048})")

_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255}|"
    r"gl(?:pat|dt|rt|ptt|ft|imt|oas|cbt|soat)-[A-Za-z0-9_-]{20,255}|glagent-[A-Za-z0-9_-]{20,255}|GR1348941[A"
    r"-Za-z0-9_-]{20}|"
    r"xox[abposre]-[A-Za-z0-9-]{10,255}|xapp-\d-[A-Za-z0-9-]{10,255}|"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}|"
    r"AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,2048}|GOCSPX-[A-Za-z0-9_-]{20,64}|"
    r"hf_[A-Za-z0-9]{20,255}|api_org_[A-Za-z0-9]{20,255}|"
    r"sk-[A-Za-z0-9_-]{20,255}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,255}|whsec_[A-Za-z0-9]{20,255}|"
    r"npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{20,2048}|SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{20,64}|"
    r"dapi[0-9a-f]{32}(?:-\d)?|dop_v1_[a-f0-9]{64}|doo_v1_[a-f0-9]{64}|dckr_pat_[A-Za-z0-9_-]{20,255}|"
    r"nvapi-[A-Za-z0-9_-]{20,255}|hv[sbr]\.[A-Za-z0-9_-]{20,255}|gsk_[A-Za-z0-9]{20,255}|r8_[A-Za-z0-9]{20,255}|"
    r"ATATT3[A-Za-z0-9_=-]{20,2048}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|lin_api_[A-Za-z0-9]{20,255}|"
    r"ntn_[A-Za-z0-9]{20,255}|pplx-[A-Za-z0-9]{20,255}|"
    r"SK[0-9a-fA-F]{32}|(?:bot)?[0-9]{8,10}:AA[A-Za-z0-9_-]{33}|secret_[A-Za-z0-9]{40,46}|key-[0-9a-f]{32}|"
    r"00(?=[A-Za-z0-9_-]{0,39}[A-Z])(?=[A-Za-z0-9_-]{0,39}[a-z])[A-Za-z0-9_-]{40}(?![A-Za-z0-9_-])|"
    r"ey[A-Za-z0-9_-]{8,4096}\.ey[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,4096})|"
    r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}|AGE-SECRET-KEY-1[0-9A-Z]{50,70}")

# key blocks: BEGIN..END of any private/secret key, or from the start of a tail to an END line
_BLOCK_KIND = r"[A-Z0-9 ]{0,40}(?:PRIVATE|SECRET|ENCRYPTED)[A-Z0-9 ]{0,40}"
_BLOCK = re.compile(r"-----BEGIN " + _BLOCK_KIND + r"-----.{0,131072}?(?:-----END " + _BLOCK_KIND + r"-----|\Z)", re.S)
_BLOCK_TAIL = re.compile(r"\A.{0,131072}?-----END " + _BLOCK_KIND + r"-----", re.S)
_PUTTY = re.compile(r"(Private-Lines:[ \t]*\d{1,4}[ \t]*\r?\n)(?:[A-Za-z0-9+/=]{1,128}\r?\n?){1,200}")

# cheap lower-case literals: a rule runs on a line only when one of its own literals is in it,
# and a line with none of them is left as is without running any regular expression
_WORD_TRIGGERS = ("key", "pass", "pwd", "secret", "token", "auth", "cred", "dsn", "cookie", "signature", "jwt",
                  "webhook", "session")
# the per-program rules need a short option (sshpass/mysql/7z/docker -p, zip/sqlcmd -P, redis-cli -a,
# ldapsearch -w, curl -u, smbclient -U), `login` (wandb, docker), `pass:` (openssl) or `configure` (aws)
_PROGRAM_TRIGGERS = (" -p", " -a", " -w", " -u", "\t-", "-user", "--auth", "login", "pass:", "configure")
_RULES = (  # (triggers, rule) in an order where an earlier rule cannot hide a later one's anchor
    (("://",), lambda t: _URL.sub(_url, t)),
    (("hooks.", "webhook"), lambda t: _WEBHOOK.sub(lambda m: m.group(1) + REDACTED, t)),
    (("://", "sig=", "token=", "key=", "password=", "pwd=", "secret=", "signature=", "credential=", "auth="),
     lambda t: _QUERY.sub(lambda m: m.group(1) + REDACTED, t)),
    (("key=", "password=", "pwd=", "secret=", "sig=", "token=", "signature="),
     lambda t: _KV_CONN.sub(lambda m: f"{m.group(1)}={REDACTED}", t)),
    (_PROGRAM_TRIGGERS, lambda t: _PROGRAM.sub(lambda m: m.group(1) + REDACTED, t)),
    (("authorization", "bearer"), lambda t: _HEADER.sub(lambda m: m.group(1) + REDACTED, t)),
    (("basic",), lambda t: _BASIC.sub(_basic, t)),
    (("set by environment",), lambda t: _NCCL_ENV.sub(_nccl_env, t)),
    (("pass",), lambda t: _NETRC.sub(lambda m: m.group(1) + REDACTED, t)),
    (("token",), lambda t: _USING_TOKEN.sub(lambda m: m.group(1) + REDACTED, t)),
    (_WORD_TRIGGERS, lambda t: _FLAG.sub(_flag, t)),
    (_WORD_TRIGGERS, lambda t: _KV.sub(_kv, t)),
)
#: the literals searched in a whole text (26 scans of it): every rule's match holds one of them, e.g.
#: `aws configure set aws_secret_access_key X` holds 'secret', `--proxy-user u:x` holds '-user'
_TRIGGERS = tuple(t.encode() for t in (
    "://", "hooks.", "sig=", "bearer", "basic", "set by environment", " -p", " -a", " -w", " -u", "\t-", "-user",
    "login", *_WORD_TRIGGERS))
#: every token shape lies in a run of at least 15 such characters (bytes of the UTF-8 text)
_LONG_RUN = re.compile(rb"[A-Za-z0-9_.~+/:-]{15,4096}")  # ':' for a Telegram bot token (digits:AA...)
_NEWLINE = re.compile(rb"\n")


def secret_name(name: str) -> bool:
    """True when an environment variable's name says its value is a secret."""
    if name in KEEP_NAMES:
        return False
    if _NAME_WHOLE.search(name):
        return True
    parts = [p for p in re.split(r"[_.\-]+", name) if p]
    if any(_NAME_PART.match(p) and not _NOT_SECRET_PART.match(p) for p in parts):
        return True
    if any(_NAME_SHORT_PART.match(p) for p in parts[1:]):
        return True
    return bool(_NAME_INSIDE.search(_NOT_SECRET_WORDS.sub("", name)))


@functools.lru_cache(maxsize=4096)
def _secret_key(name: str) -> bool:
    """A key in text (`hf_token`, `X-API-Key`, `DB_PASS`, `keyStorePassword`) that names a secret.

    Read as words (split at `_ . -` and camelCase), the LAST word must name a secret
    (`key` only with a qualifier: `api_key`, `secret_key`; `id` only in `private_key_id`,
    `session_id`; `url` only in `webhook_url`), and
    no earlier word may make it a counter or a tokenizer setting (`max_tokens`, `eos_token`).
    An upper-case environment name follows the environment rule (secret_name: `KAGGLE_KEY`).
    """
    bare = name.strip("'\"")
    if bare.isupper() and "_" in bare and secret_name(bare):
        return True
    words = [w.lower() for w in _WORD_SPLIT.split(bare) if w]
    if not words or any(w in _STOP_WORDS for w in words[:-1]):
        return False
    last, prev = words[-1], words[-2] if len(words) > 1 else ""
    if last in _LAST_WORDS:
        return True
    if last in ("key", "keys"):
        return prev in _KEY_QUALIFIERS
    if last == "id":
        return (prev == "key" and len(words) > 2 and words[-3] == "private") or prev == "session"
    return last == "url" and prev == "webhook"


def _url(match: re.Match) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    at = rest.rfind("@")
    if at < 0:
        return match.group(0)
    userinfo, tail = rest[:at], rest[at + 1:]
    if _PORT_PATH.match(rest) or ("/" in userinfo and ":" not in userinfo.split("/", 1)[0]):
        return scheme + _redact_url_query(rest)  # host:port/path@x or host/path@x: an '@' in the path
    user, colon, _ = userinfo.partition(":")
    if colon:
        return f"{scheme}{user}:{REDACTED}@{_redact_url_query(tail)}"
    return f"{scheme}{REDACTED}@{_redact_url_query(tail)}"  # a bare token as user name (Sentry DSNs, git tokens)


def _redact_url_query(text: str) -> str:
    return _QUERY.sub(lambda m: m.group(1) + REDACTED, text)


_WORD_BEFORE = re.compile(r"([A-Za-z]{1,30})[ \t]{1,4}\Z")


def _kv(match: re.Match) -> str:
    name, value = match.group("name"), match.group("value")
    if not _secret_key(name) or value.lower() in _EMPTY_VALUES or value.startswith(REDACTED):
        return match.group(0)
    before = _WORD_BEFORE.search(match.string, max(0, match.start() - 40), match.start())
    if before and before.group(1).lower() in _STOP_WORDS:  # 'forward pass: 12 ms', 'max token: 5'
        return match.group(0)
    quote = value[0] if value[0] in "'\"" else ""
    return f"{match.group('key')}{match.group('sep')}{quote}{REDACTED}{quote}"


def _flag(match: re.Match) -> str:
    value = match.group(3)
    if not _secret_key(match.group(1).lstrip("-")) or value.lower() in _EMPTY_VALUES or value.startswith(REDACTED):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def _basic(match: re.Match) -> str:
    """`Basic <base64>` is hidden when the base64 is a user:password pair (not 'Basic configuration')."""
    try:
        raw = base64.b64decode(match.group(1) + "=" * (-len(match.group(1)) % 4), validate=True)
    except (binascii.Error, ValueError):
        return match.group(0)
    return f"Basic {REDACTED}" if b":" in raw else match.group(0)


def _nccl_env(match: re.Match) -> str:
    return f"{match.group(1)} set by environment to {REDACTED}" if secret_name(match.group(1)) else match.group(0)


def _redact_line(text: str, low: str, shapes: bool = True) -> str:
    """The single-line rules whose trigger literal is in the line (`low` is it lower-cased), then the
    token shapes when `shapes` (the line holds a run of token characters that a shape matches)."""
    for triggers, rule in _RULES:
        if any(map(low.__contains__, triggers)):
            new = rule(text)
            if new is not text:  # re.sub returns its argument itself when nothing matched
                text, low = new, new.lower()
    return _SHAPES.sub(REDACTED, text) if shapes else text


def _redact_blocks(text: str) -> str:
    if "-----BEGIN" in text:
        text = _BLOCK.sub(REDACTED, text)
    if "-----END" in text and ("PRIVATE" in text or "SECRET" in text or "ENCRYPTED" in text):
        head = text.find("-----BEGIN ")
        end = _BLOCK_TAIL.match(text)
        if end and (head < 0 or head > end.end()):
            text = REDACTED + text[end.end():]
    if "Private-Lines:" in text:
        text = _PUTTY.sub(lambda m: m.group(1) + REDACTED + "\n", text)
    return text


def redact_text(text: str) -> str:
    """`text` with every secret shape the rules know replaced by <redacted>.

    Only lines that hold a trigger literal, or a run of token characters that a token
    shape matches, go through the rules; they are found on the whole text at once (a
    substring scan per literal, one regular expression for the runs), so 26 MB of real
    NCCL/PyTorch/kernel logs cost about as much as reading them twice.
    """
    if not text:
        return text
    text = _redact_blocks(text)
    raw = text.encode("utf-8", "surrogatepass")  # '\n' is one byte in UTF-8: line i of raw is line i of text
    low = raw.lower()  # ASCII only: offsets stay those of raw
    newlines = [m.start() for m in _NEWLINE.finditer(raw)]
    hits: set[int] = set()
    shaped_lines: set[int] = set()
    for trigger in _TRIGGERS:
        at = low.find(trigger)
        while at >= 0:
            line = bisect.bisect_right(newlines, at)
            hits.add(line)
            at = low.find(trigger, newlines[line] + 1) if line < len(newlines) else -1
    shaped: dict[bytes, bool] = {}  # a run seen before is not matched again (logs repeat identifiers)
    for m in _LONG_RUN.finditer(raw):
        run = m.group()
        found = shaped.get(run)
        if found is None:
            found = shaped[run] = _SHAPES.search(run.decode("ascii")) is not None
        if found:
            shaped_lines.add(bisect.bisect_right(newlines, m.start()))
    if not hits and not shaped_lines:
        return text
    lines = text.split("\n")
    done: dict[tuple[str, bool], str] = {}  # logs repeat lines: each distinct one is redacted once
    for i in hits | shaped_lines:
        key = (lines[i], i in shaped_lines)
        out = done.get(key)
        if out is None:
            out = done[key] = _redact_line(key[0], key[0].lower(), key[1])
        lines[i] = out
    return "\n".join(lines)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of an environment: secret-named values replaced whole, other values scrubbed."""
    return {key: REDACTED if secret_name(key) else redact_text(value) for key, value in env.items()}


#: programs whose short options take a password as the next argv element (or attached)
_PROGRAM_FLAGS = {
    "sshpass": ("-p",), "redis-cli": ("-a",), "ldapsearch": ("-w",), "ldapmodify": ("-w",), "ldapadd": ("-w",),
    "ldapdelete": ("-w",), "ldapwhoami": ("-w",), "zip": ("-P",), "unzip": ("-P",), "sqlcmd": ("-P",),
    "bcp": ("-P",), "docker login": ("-p",), "podman login": ("-p",), "mysql": ("-p",), "mysqldump": ("-p",),
    "mysqladmin": ("-p",), "mariadb": ("-p",), "7z": ("-p",), "7za": ("-p",),
}
_MYSQL_NAME = re.compile(r"(?:mysql|mariadb)[A-Za-z0-9._-]{0,30}")
#: `-p` with a value attached that mixes letters and digits (or other marks): a password (`-pS3cretPw9`), where
#: `-pthread`, `-pipe` or `-p8080` are not
_ATTACHED_P = re.compile(r"-p(?=[^\s]{0,2047}[0-9])(?=[^\s]{0,2047}[A-Za-z])[^\s=]{5,2048}")
_ATTACHED_ONLY = frozenset({"mysql", "mysqldump", "mysqladmin", "mariadb", "7z", "7za"})  # -pX; '-p db' prompts
_USER_PASS_FLAGS = {"curl": ("-u", "--user", "--proxy-user", "-U"), "wget": (), "http": ("-a", "--auth"),
                    "https": ("-a", "--auth"), "smbclient": ("-U",)}


def _flag_takes_next(arg: str) -> bool:
    """`--token` / `--password`-style option given alone, whose value is the next argv element."""
    return bool(re.fullmatch(_FLAG_NAME, arg, re.I)) and _secret_key(arg.lstrip("-"))


def _user_pass(value: str) -> str:
    """'admin:pw' -> 'admin:<redacted>' (curl -u), 'user%pw' -> 'user%<redacted>' (smbclient -U)."""
    for sep in (":", "%"):
        user, found, _ = value.partition(sep)
        if found:
            return f"{user}{sep}{REDACTED}"
    return value


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secrets hidden: `--token=x`, `--token x`, per-program password options
    (`sshpass -p x`, `mysql -px`, `curl -u user:x`, `wandb login KEY`), and any secret shape inside an element."""
    out: list[str] = []
    program = ""
    hide_next = user_next = False
    words_after_login = -1
    for arg in argv:
        arg = str(arg)
        if hide_next and not (arg.startswith("-") and len(arg) > 1):
            out.append(REDACTED)
            hide_next = False
            continue
        if user_next:
            out.append(_user_pass(arg))
            user_next = False
            continue
        hide_next = user_next = False
        base = os.path.basename(arg)
        if _MYSQL_NAME.fullmatch(base):
            base = "mysql"  # mysqlsh, mysql.real, mariadb-dump...
        if base in _PROGRAM_FLAGS or base in _USER_PASS_FLAGS or base in ("wandb", "aws"):
            program, words_after_login = base, -1
        elif program == "wandb" and arg == "login":
            words_after_login = 0
        elif base in ("docker", "podman"):
            program = base
        elif program in ("docker", "podman") and arg == "login":
            program = f"{program} login"  # '-p' is a password only there ('docker run -p 80:80' is a port)
        elif words_after_login >= 0 and not arg.startswith("-"):
            out.append(REDACTED)  # wandb login [options] KEY
            continue
        elif program == "aws" and len(out) >= 2 and out[-2:] == ["configure", "set"] and re.search(
                r"(?i)secret|token|key", arg):
            hide_next = True
        flags = _PROGRAM_FLAGS.get(program, ())
        short = next((f for f in flags if arg.startswith(f)), None)
        if short and arg != short:
            out.append(short + REDACTED)  # -pSECRET
            continue
        if short and program not in _ATTACHED_ONLY:
            hide_next = True
            out.append(arg)
            continue
        if arg in _USER_PASS_FLAGS.get(program, ()):
            user_next = True
            out.append(arg)
            continue
        if _ATTACHED_P.fullmatch(arg):
            out.append("-p" + REDACTED)  # `-pS3cret9` (mysql style) after any program: a port or -pthread has no mix
            continue
        hide_next = hide_next or _flag_takes_next(arg)
        out.append(redact_text(arg))
    return out


def redact_lines(lines: Iterable[str]) -> list[str]:
    """redact_text over lines (logs)."""
    return [redact_text(line) for line in lines]
