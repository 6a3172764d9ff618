"""Secret scanning: a sample of every rule is found, ordinary notes are not, and scanning stays linear."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import time
import uuid

import pytest
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from hypothesis import given
from hypothesis import strategies as st

from kbserver.changes import scan_secrets
from kbserver.changes.secrets import RULES, _jwt, _npm, _openai_legacy

# Every credential is generated at run time, so no real-looking key sits in the repository (and
# push protection of code hosts has nothing to object to).
_rng = random.Random(20261101)
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"


def _r(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _pem(kind: str) -> str:
    body = base64.encodebytes(_rng.randbytes(600)).decode()
    return f"-----BEGIN {kind}-----\n{body}-----END {kind}-----\n"


def _jwt_token() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": "1234567890", "name": "Ada", "iat": 1516239022}).encode())
    return f"{header}.{payload}.{_b64url(_rng.randbytes(32))}"


# rule name -> a credential in that format, inside a line of ordinary text
SAMPLES: dict[str, str] = {
    "Anthropic API Key": "ANTHROPIC_API_KEY=sk-ant-api03-" + _r(93, B64URL) + "AA",
    "OpenAI Project Key": "export OPENAI_API_KEY=sk-proj-" + _r(156, B64URL.replace("T", "")),
    "GitHub Fine-grained Token": "token: github_pat_" + _r(22) + "_" + _r(59),
    "Google API Key": "https://maps.googleapis.com/maps/api/js?key=AIza" + _r(35, B64URL),
    "Hugging Face Token": "HF_TOKEN=hf_" + _r(34, string.ascii_letters),
    "Private Key": _pem("RSA PRIVATE KEY"),
    "AWS Access Key": "aws_access_key_id = AKIA" + _r(16, string.ascii_uppercase + string.digits),
    "Azure Storage Account access key": "DefaultEndpointsProtocol=https;AccountName=x;AccountKey="
    + _r(86, ALNUM + "+/")
    + "==",
    "GitHub Token": "use ghp_" + _r(36) + " for the API",
    "GitLab Token": "GITLAB_TOKEN=glpat-" + _r(20, B64URL),
    "Slack Token": "bot token xoxb-"
    + _r(12, string.digits)
    + "-"
    + _r(12, string.digits)
    + "-"
    + _r(24).lower(),
    "Stripe Access Key": "stripe: sk_" + "live_" + _r(24),
    "Twilio API Key": "twilio SK" + _r(32, string.ascii_lowercase + string.digits),
    "JSON Web Token": "Authorization: Bearer " + _jwt_token(),
    "NPM tokens": "//registry.npmjs.org/:_authToken=" + str(uuid.UUID(int=_rng.getrandbits(128))),
    "npm Token": "NPM_TOKEN=npm_" + _r(36),
    "Stripe Test Key": "stripe test: sk_" + "test_" + _r(24),
    "AWS Secret Access Key": "aws_secret_access_key=" + _r(40, ALNUM + "/+"),
    "kbserver Token": "token kbs_" + _r(43, B64URL),
    "URL with Credentials": "DATABASE_URL=postgres://app:" + _r(16) + "@db.internal:5432/app",
    "PEM Private Key": _pem("ENCRYPTED PRIVATE KEY"),
    "PyPI Token": "password = pypi-AgEIcHlwaS5vcmc" + _r(120, B64URL),
    "SendGrid API Key": "SG." + _r(22, B64URL) + "." + _r(43, B64URL),
    "Mailchimp Access Key": "mailchimp " + _r(32, "0123456789abcdef") + "-us6",
    "Telegram Bot Token": "bot 123456789:" + _r(35, B64URL),
    "Discord Bot Token": "discord M" + _r(23, B64URL) + "." + _r(6, B64URL) + "." + _r(27, B64URL),
    "OpenAI Token": "sk-" + _r(20) + "T3BlbkFJ" + _r(20),
    "Artifactory Credentials": "artifactory AKCp" + _r(69),
    "Square OAuth Secret": "square sq0csp-" + _r(43, B64URL),
    "OpenAI API Key": "sk-" + _r(47) + "4",
    "Password Assignment": 'password = "' + _r(12) + '"',
    "Secret Assignment": "SECRET_KEY=" + _r(40) + "9",
    "Slack App Token": "SLACK_APP_TOKEN=xapp-1-A0"
    + _r(9, string.ascii_uppercase + string.digits)
    + "-"
    + _r(13, string.digits)
    + "-"
    + _r(64, "0123456789abcdef"),
    "Stripe Webhook Secret": "webhook whsec_" + _r(32),
    "AWS Session Token": "token IQoJb3JpZ2luX2VjE" + _r(300, ALNUM + "/+"),
    "PuTTY Private Key": "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n" + _r(64),
}

MORE_SECRETS = [
    _pem("PRIVATE KEY"),
    _pem("OPENSSH PRIVATE KEY"),
    _pem("EC PRIVATE KEY"),
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n" + _r(64) + "\n",
    "ghs_" + _r(36),
    "xoxp-1234-5678-abcdef",
    "sk-ant-admin01-" + _r(93, B64URL),
    "sk-svcacct-" + _r(60, B64URL),
    # real sk-proj- keys hold T3BlbkFJ too; either OpenAI rule may name them
    "sk-proj-" + _r(74, B64URL) + "T3BlbkFJ" + _r(74, B64URL),
    "AKIA" + _r(16, string.ascii_uppercase + string.digits),
    "ASIA" + _r(16, string.ascii_uppercase + string.digits),
    "https://hooks.slack.com/services/T" + _r(8) + "/B" + _r(8) + "/" + _r(24),
    "//registry.npmjs.org/:_authToken=npm_" + _r(36),
    "rk_test_" + _r(30),
    "AWS_SECRET_ACCESS_KEY: " + _r(40, ALNUM + "/+"),
    'aws_secret_key = "' + _r(40, ALNUM + "/+") + '"',
    "admin token kba_" + _r(43, B64URL),
    "OAuth access token kbo_" + _r(43, B64URL),
    "refresh_token: kbr_" + _r(43, B64URL),
    "mysql://root:" + _r(12) + "@10.0.0.5/db",
    "redis://default:" + _r(20) + "@cache.prod.internal:6379",
    "https://deploy:" + _r(10) + "%21x@git.company.com/repo.git",
    _pem("DH PRIVATE KEY"),
]


def test_every_rule_has_a_sample() -> None:
    assert sorted(SAMPLES) == sorted(rule.name for rule in RULES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_is_found_by_its_rule(name: str) -> None:
    text = f"Meeting notes.\n{SAMPLES[name]}\nMore notes after it.\n"
    assert scan_secrets(text) == name
    # The needles only skip texts the rule cannot match: the rule finds the sample without them.
    [rule] = [r for r in RULES if r.name == name]
    assert rule.found(text) and rule.matches(SAMPLES[name])


@pytest.mark.parametrize("text", MORE_SECRETS)
def test_more_credentials_are_found(text: str) -> None:
    assert scan_secrets(f"notes\n{text}\n") is not None


@pytest.mark.parametrize("name", ["OpenAI Project Key", "Anthropic API Key", "AWS Access Key"])
def test_secret_in_the_middle_of_a_long_text(name: str) -> None:
    prose = "An ordinary line of notes about the project and its plans.\n" * 2000
    assert scan_secrets(prose + SAMPLES[name] + " " + prose) == name


NOT_SECRETS = [
    "",
    "The quick brown fox jumps over the lazy dog.",
    "The password is kept in the team vault; ask Ada for access. Never paste a password here.",
    "password: see 1Password\napi key: ask ops\ntoken budget: 4096\nsecret sauce: butter",
    "我们在周一的会议上讨论了知识库的结构。密码和令牌不要写进笔记。下一步：整理需求文档。",
    "Le mot de passe est dans le coffre.",
    f"sha256: {hashlib.sha256(b'a').hexdigest()}",
    "expected_sha256 = " + hashlib.sha256(b"b").hexdigest(),
    "key = " + hashlib.sha256(b"c").hexdigest(),
    "\n".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(200)),
    "commit 3b18e512dba79e4c8300dd08aeb37f8e728b8dad\nMerge: 1a2b3c4 5d6e7f8",
    "\n".join(hashlib.sha1(str(i).encode()).hexdigest() for i in range(200)),
    "\n".join(str(uuid.UUID(int=_rng.getrandbits(128))) for _ in range(200)),
    "\n".join(str(uuid.UUID(int=_rng.getrandbits(128))).upper() for _ in range(200)),
    "| key        | value        |\n|------------|--------------|\n| password   | (in vault)   |",
    "token" + " " * 2000 + "end",
    "Server 203.0.113.7:8080 and 10.0.0.1; mail ada@example.com; see https://example.com/a/b?c=d",
    "postgres://user:pass@localhost:5432/db is the example connection string",  # placeholder password
    "postgres://user:password@example.com/db",
    "mysql://app:s3cr3tValue@db.example/app",  # documentation host
    "https://user:<password>@host.com/x and redis://:${REDIS_PASSWORD}@redis:6379",
    "amqp://guest:********@rabbit:5672 and ftp://anon:xxxx@ftp.test",
    "https://ada:{{ secret }}@ci.company.com; postgres://u:$PGPASSWORD@db/app",
    "email ada:bob@example.org, a time 12:30@home",
    "aws_secret_access_key = <your secret key>",
    "npm_config_registry and npm_install are not tokens; sk_test_ is Stripe's prefix",
    "task-based planning, desk-top, risk-free, sk-learn, hf_hub_download, github_pat_ is the prefix",
    "AIza is how Google API keys start; sk-ant- is Anthropic's prefix; eyJ starts base64 JSON.",
    "https://github.com/owner/repo/blob/3b18e512dba79e4c8300dd08aeb37f8e728b8dad/README.md",
    "BEGIN; UPDATE t SET x = 1; COMMIT;",
    "2026-11-01T12:34:56Z 1730464496 1730464496123",
    "Version 1.2.3, build 20261101.1, ticket ABC-1234, SKU SK-001, AC-130",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_ordinary_notes_are_not_secrets(text: str) -> None:
    assert scan_secrets(text) is None


def test_base64_blob_is_not_a_secret() -> None:
    blob = base64.b64encode(random.Random(7).randbytes(3000)).decode()
    assert scan_secrets("\n".join(blob[i : i + 76] for i in range(0, len(blob), 76))) is None


# --- the linear drivers find what detect-secrets' own plugins find ------------------------------

_JWT_PARTS = ["eyJ", _b64url(b'{"a":1}'), _b64url(b'{"b":"c"}'), ".", "a", "-", "=", " ", "x.", "/", "+"]
_NPM_PARTS = [
    "//",
    "/",
    ":_authToken=",
    "npm_",
    "x",
    " ",
    "\n",
    "\t",
    "0123456789abcdef0123456789abcdef-12-",
    "a",
]
_OPENAI_PARTS = ["sk-", "a" * 20, "T3BlbkFJ", "b" * 7, "-", "_", " ", "Z"]


def _plugin_finds(plugin: JwtTokenDetector | NpmDetector | OpenAIDetector, text: str) -> bool:
    return any(True for _ in plugin.analyze_string(text))


@given(st.lists(st.sampled_from(_JWT_PARTS), max_size=12).map("".join))
def test_jwt_driver_agrees_with_detect_secrets(text: str) -> None:
    assert any(True for _ in _jwt(text)) == _plugin_finds(JwtTokenDetector(), text)


@given(st.lists(st.sampled_from(_NPM_PARTS), max_size=10).map("".join))
def test_npm_driver_agrees_with_detect_secrets(text: str) -> None:
    assert any(True for _ in _npm(text)) == _plugin_finds(NpmDetector(), text)


@given(st.lists(st.sampled_from(_OPENAI_PARTS), max_size=10).map("".join))
def test_openai_driver_agrees_with_detect_secrets(text: str) -> None:
    assert any(True for _ in _openai_legacy(text)) == _plugin_finds(OpenAIDetector(), text)


# --- speed -------------------------------------------------------------------------------------

_N = 256 * 1024
# Inputs on which some detect-secrets patterns backtrack: quadratically ("eyJ" * N for the JWT
# plugin takes 27 s, "//" * N for the npm one minutes) or cubically ("key" + spaces for the
# IBM/Cloudant/SoftLayer ones, which we therefore leave out).
ADVERSARIAL = {
    "eyJ": "eyJ" * (_N // 3),
    "eyJ.": "eyJa." * (_N // 5),
    "//": "//" * (_N // 2) + "/:_authToken=",
    "sk-": "sk-" * (_N // 3) + "T3BlbkFJ",
    "sk-core": ("sk-" + "a" * 20 + "T3BlbkFJ") * (_N // 31),
    "key spaces": "password" + " " * _N,
    "aws key": "aws key " * (_N // 8),
    "digits": "1234567890:" * (_N // 11),
    "AP": " AP1" * (_N // 4),
    "plain": "a" * _N,
    "secret names": "api_key" * (_N // 7),
    "secret value": "client_secret: " + "a1" * (_N // 2),
    "putty headers": "PuTTY-User-Key-File-" * (_N // 20) + "Private-Lines:",
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_scanning_is_linear_on_adversarial_text(name: str) -> None:
    start = time.perf_counter()
    scan_secrets(ADVERSARIAL[name])
    # ~10-80 ms here; the bound only has to catch quadratic blow-ups (seconds to minutes).
    assert time.perf_counter() - start < 2.0
