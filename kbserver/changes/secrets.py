"""Credential detection: detect-secrets' provider plugins plus rules for newer key formats."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from kbserver.core.errors import SecretDetected

__all__ = ["RULES", "new_secret", "refuse_secrets", "scan_secrets"]

# Why only these plugins:
# - No KeywordDetector or high-entropy plugins: notes hold sha256 digests, commit ids and the word
#   "password" all the time.
# - No Cloudant, IBM Cloud IAM, IBM COS HMAC or SoftLayer: they are keyword detectors in disguise
#   (`key = <value of some length>`), and their regexes backtrack cubically on a run of spaces after
#   the keyword ("key" + 1 KiB of spaces takes 8 s), which any write could trigger.
# - No BasicAuth plugin (`scheme://user:pass@host`, quadratic on long runs): our own rule below
#   catches URLs with credentials and lets obvious placeholders through (user:password@, example.com).
# - No IPPublic: an address is not a credential.
#
# Thread safety: we never call `analyze_line` (it reads detect-secrets' global settings to decide
# whether to verify secrets over the network). `analyze_string` and the compiled patterns are pure,
# so one shared instance of each plugin serves every thread.


@dataclass(frozen=True)
class Rule:
    """One credential format: `name` is what SecretDetected reports as `rule`."""

    name: str
    finds: Callable[[str], Iterator[str]]  # every credential of this format in a text
    # Substrings of which every match holds at least one; a text holding none is skipped unscanned.
    needles: tuple[str, ...] = ()

    def search(self, text: str) -> Iterator[str]:
        if self.needles and not any(needle in text for needle in self.needles):
            return iter(())
        return self.finds(text)

    def found(self, text: str) -> bool:
        return next(self.finds(text), None) is not None

    def matches(self, text: str) -> bool:
        return next(self.search(text), None) is not None


def _plugin(plugin: RegexBasedDetector) -> Callable[[str], Iterator[str]]:
    """Run a plugin whose patterns scan in linear time on the whole text at once.

    None of the patterns we run this way crosses a line break except as a `\\s` boundary (where
    line-by-line scanning has `^` or `$`), so scanning the whole text finds what scanning it line
    by line would, with one regex pass per pattern.
    """

    def finds(text: str) -> Iterator[str]:
        return (str(found) for found in plugin.analyze_string(text))

    return finds


def _first_starts(
    text: str, anchor: str, pattern: re.Pattern[str], skip: Callable[[str, int], int]
) -> Iterator[str]:
    """The matches `pattern.findall` would see, in linear time, for patterns that backtrack badly.

    The plugin's own pattern is tried only at the first `anchor` of each stretch that `skip` ends:
    for the patterns below, when that try fails every later start in the same stretch fails too,
    so `findall`'s retries there (quadratic in the stretch) are skipped.
    """
    pos = 0
    while (start := text.find(anchor, pos)) != -1:
        match = pattern.match(text, start)
        if match is None:
            pos = max(skip(text, start), start + 1)
        else:
            yield match.group()
            pos = max(match.end(), start + 1)


def _run_end(run: re.Pattern[str]) -> Callable[[str, int], int]:
    def skip(text: str, start: int) -> int:
        match = run.match(text, start)
        return match.end() if match else start + 1

    return skip


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end == -1 else end


_JWT = JwtTokenDetector()
_JWT_RUN = re.compile(r"[A-Za-z0-9_=-]+")  # the characters of a JWT's first part
_OPENAI_RUN = re.compile(r"[A-Za-z0-9_-]+")  # the characters an OpenAI key is made of
_NPM_PATTERN = NpmDetector.denylist[0]
_OPENAI_PATTERN = OpenAIDetector.denylist[0]
_JWT_PATTERN = JwtTokenDetector.denylist[0]


def _jwt(text: str) -> Iterator[str]:
    # JwtTokenDetector yields its matches filtered by `is_formally_valid` (header and payload decode
    # as base64 JSON).
    candidates = _first_starts(text, "eyJ", _JWT_PATTERN, _run_end(_JWT_RUN))
    return (token for token in candidates if _JWT.is_formally_valid(token))


def _npm(text: str) -> Iterator[str]:
    # `//.+/:_authToken=...`: a later "//" on the same line can only match if the first one does.
    return _first_starts(text, "//", _NPM_PATTERN, _line_end)


def _openai_legacy(text: str) -> Iterator[str]:
    return _first_starts(text, "sk-", _OPENAI_PATTERN, _run_end(_OPENAI_RUN))


def _regex(pattern: str) -> Callable[[str], Iterator[str]]:
    compiled = re.compile(pattern)

    def finds(text: str) -> Iterator[str]:
        return (m.group() for m in compiled.finditer(text))

    return finds


# scheme://user:password@host, tried only where "://" occurs: the scheme is matched backwards from
# there and the rest forwards, in bounded runs, so each "://" costs at most ~350 characters.
_URL_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}\Z")
_URL_REST = re.compile(
    r"(?P<user>[^\s:/@?#\[\]]{0,64}):(?P<password>[^\s/@?#\[\]]{1,128})@(?P<host>[^\s/:?#@]{1,128})"
)
# Passwords and hosts that only ever stand for a real one (documentation, templates).
_PLACEHOLDER_PASSWORDS = frozenset(
    "password pass passwd pwd pw secret changeme change_me mypassword yourpassword your_password "
    "your-password mysecret example test dummy fake sample placeholder redacted hidden password123 "
    "p@ssw0rd pa55word letmein hunter2 foo bar foobar".split()
)
_PLACEHOLDER_SHAPES = re.compile(
    r"<[^>]*>|\[[^\]]*\]|\{\{.*\}\}|\$\{.*\}|\$\(.*\)|\$[A-Za-z_][A-Za-z0-9_]*|%[sd]|%\(.*\)s|"
    r"(.)\1*|\.\.\.|…"
)
_PLACEHOLDER_HOSTS = re.compile(
    r"(?:.*\.)?example(?:\.(?:com|org|net))?|.*\.(?:test|invalid|example|localhost)", re.IGNORECASE
)


def _url_credentials(text: str) -> Iterator[str]:
    pos = 0
    while (at := text.find("://", pos)) != -1:
        pos = at + 3
        if _URL_SCHEME.search(text, max(0, at - 22), at) is None:
            continue
        m = _URL_REST.match(text, pos)
        if m is None:
            continue
        password = unquote(m["password"])
        if password.lower() in _PLACEHOLDER_PASSWORDS or _PLACEHOLDER_SHAPES.fullmatch(password):
            continue
        if _PLACEHOLDER_HOSTS.fullmatch(m["host"]):
            continue
        yield text[at : m.end()]


# `password = "..."` (quoted) or `password=...` / `DB_PASSWORD: ...` (bare, as in env files and YAML).
# A bare value is one run of non-space characters without quotes, brackets or `$`/`%` (templates),
# `=` only as base64's padding at its end, ended by a space, `,`, `;` or the end of the line; the
# possessive runs never backtrack.
_PASSWORD_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z0-9_]{0,30}?(?:password|passwd)[\"']?[ \t]{0,10}(?::|=|:=)[ \t]{0,10}"
    r"(?:([\"'])(?P<value>[^\"'\s]{6,200})\1|(?P<bare>[^\s\"'`<>\[\]{}()$%,;=]{6,200}+={0,2}+)(?![^\s,;]))",
    re.IGNORECASE,
)
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")


def _bare_password(value: str) -> bool:
    """Whether an unquoted value reads as a password rather than a word of prose ("password: unknown",
    "password: see 1Password", "password: !vault", "password: https://vault/..."): letters and digits
    both, and no word or shape of a placeholder or a reference."""
    lowered = value.lower()
    if "passw" in lowered or "://" in value or value[0] in "!*&#":
        return False
    return _LETTER.search(value) is not None and _DIGIT.search(value) is not None


def _password_assignment(text: str) -> Iterator[str]:
    for m in _PASSWORD_ASSIGNMENT.finditer(text):
        value = m["value"] if m["value"] is not None else m["bare"]
        if value.lower() in _PLACEHOLDER_PASSWORDS or _PLACEHOLDER_SHAPES.fullmatch(value):
            continue
        if m["bare"] is not None and not _bare_password(value):
            continue
        yield m.group()


# `SECRET_KEY=...`, `"SecretAccessKey": "..."`, `client_secret: ...`: a key, token or client secret
# assigned as a password is (see _PASSWORD_ASSIGNMENT), with a value of 10+ characters.
_SECRET_NAMES = ("secret", "api_key", "api-key", "apikey", "session_token", "sessiontoken", "session-token")
_SECRET_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z0-9_]{0,30}?(?:secret[_-]?(?:access[_-]?)?key|api[_-]?key|client[_-]?secret"
    r"|session[_-]?token)[\"']?[ \t]{0,10}(?::|=|:=)[ \t]{0,10}"
    r"(?:([\"'])(?P<value>[^\"'\s]{10,2000})\1|(?P<bare>[^\s\"'`<>\[\]{}()$%,;=]{10,2000}+={0,2}+)(?![^\s,;]))",
    re.IGNORECASE,
)
# Words that only a placeholder holds ("YOUR_API_KEY", "<secret>", "process.env.API_KEY").
_PLACEHOLDER_WORDS = re.compile(
    r"your|example|placeholder|changeme|change_me|redacted|dummy|sample|insert|replace|xxxx|\.\.\.|"
    r"^(?:process\.env|os\.environ|os\.getenv|env\b|settings\.|config\.)",
    re.IGNORECASE,
)


def _secret_assignment(text: str) -> Iterator[str]:
    lowered = text.lower()
    if not any(name in lowered for name in _SECRET_NAMES):
        return
    for m in _SECRET_ASSIGNMENT.finditer(text):
        value = m["value"] if m["value"] is not None else m["bare"]
        if value.lower() in _PLACEHOLDER_PASSWORDS or _PLACEHOLDER_SHAPES.fullmatch(value):
            continue
        if _PLACEHOLDER_WORDS.search(value) or "://" in value or value[0] in "!*&#":
            continue
        if _LETTER.search(value) is not None and _DIGIT.search(value) is not None:
            yield m.group()


def _putty(text: str) -> Iterator[str]:
    """A PuTTY private key file (.ppk, any version): its first line, then `Private-Lines:` within
    4,000 characters. Linear: each header looks at the next `Private-Lines:` only."""
    pos, lines = 0, -1
    while (start := text.find("PuTTY-User-Key-File-", pos)) != -1:
        pos = start + 20
        if lines < start:
            lines = text.find("Private-Lines:", start)
            if lines == -1:
                return
        if lines - start <= 4000:
            yield text[start : lines + 14]


# Formats detect-secrets 1.5 does not know. Lengths follow the providers' current keys, with room
# for change but long enough that identifiers and prose never match.
_OWN_RULES = (
    # sk-ant-api03-<95 chars>, also sk-ant-admin01-..., sk-ant-oat01-...
    Rule("Anthropic API Key", _regex(r"sk-ant-[a-z]{2,12}[0-9]{2}-[A-Za-z0-9_-]{80,}"), ("sk-ant-",)),
    # sk-proj-<156 chars> (first ones were 48), sk-svcacct-..., sk-admin-...
    Rule("OpenAI Project Key", _regex(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}"), ("sk-",)),
    # github_pat_<22>_<59>
    Rule(
        "GitHub Fine-grained Token",
        _regex(r"github_pat_[A-Za-z0-9]{20,}_[A-Za-z0-9]{50,}"),
        ("github_pat_",),
    ),
    # AIza<35>, exactly 39 characters; not inside a longer base64 run
    Rule(
        "Google API Key",
        _regex(r"(?<![A-Za-z0-9_+/-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
        ("AIza",),
    ),
    # hf_<34 letters>
    Rule("Hugging Face Token", _regex(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34}(?![A-Za-z0-9_])"), ("hf_",)),
    # npm_<36>: npm's granular and automation tokens, also outside an .npmrc line
    Rule("npm Token", _regex(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), ("npm_",)),
    # sk_test_<24+>, rk_test_...: Stripe's test-mode secret and restricted keys
    Rule("Stripe Test Key", _regex(r"(?<![A-Za-z0-9])[sr]k_test_[0-9A-Za-z]{24,}"), ("k_test_",)),
    # aws_secret_access_key = <40> without quotes (detect-secrets wants the value quoted)
    Rule(
        "AWS Secret Access Key",
        _regex(
            r"(?i)aws_?secret_?(?:access_?)?key[\"']?[ \t]{0,10}[:=][ \t]{0,10}[\"']?"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
        ),
        ("ecret", "ECRET"),
    ),
    # kbs_/kba_/kbo_/kbr_ + 43: this server's own agent, admin, OAuth access and refresh tokens
    Rule(
        "kbserver Token",
        _regex(r"(?<![A-Za-z0-9_])kb[asor]_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"),
        ("kbs_", "kba_", "kbo_", "kbr_"),
    ),
    # scheme://user:password@host (also scheme://:password@host), unless password or host is an
    # obvious placeholder
    Rule("URL with Credentials", _url_credentials, ("://",)),
    # xapp-1-A0...-123...-<hex>: Slack's app-level tokens; xoxe-1-..., xoxe.xoxp-1-...: its refresh
    # and rotating tokens (detect-secrets knows xoxa/b/p/o/s/r only)
    Rule(
        "Slack App Token",
        _regex(
            r"(?<![A-Za-z0-9])(?:xapp-[0-9]{1,4}-[A-Za-z0-9]{6,}-[0-9]{6,}-[A-Za-z0-9]{20,}"
            r"|xoxe(?:\.xox[a-z])?-[0-9]{1,4}-[A-Za-z0-9-]{40,})"
        ),
        ("xapp-", "xoxe"),
    ),
    # whsec_<32+>: Stripe's webhook signing secrets
    Rule("Stripe Webhook Secret", _regex(r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9+/=]{24,}"), ("whsec_",)),
    # AWS STS session tokens: base64 that starts with a fixed header, hundreds of characters long
    Rule(
        "AWS Session Token",
        _regex(r"(?<![A-Za-z0-9/+])(?:IQoJb3JpZ2luX2Vj|FwoGZXIvYXdzE)[A-Za-z0-9/+]{100,}={0,2}"),
        ("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdz"),
    ),
    # PuTTY-User-Key-File-3: ... Private-Lines: (detect-secrets knows version 2's first line only)
    Rule("PuTTY Private Key", _putty, ("PuTTY-User-Key-File-",)),
)


def _detect_secrets_rule(plugin: RegexBasedDetector, needles: tuple[str, ...] = ()) -> Rule:
    return Rule(str(plugin.secret_type), _plugin(plugin), needles)


# Every needle below is a literal that each of the plugin's patterns requires (read them in
# detect_secrets/plugins/); tests/changes check a sample of every rule.
_DETECT_SECRETS_RULES = (
    _detect_secrets_rule(PrivateKeyDetector(), ("PRIVATE KEY", "PuTTY-User-Key-File-2")),
    _detect_secrets_rule(AWSKeyDetector()),
    _detect_secrets_rule(AzureStorageKeyDetector(), ("AccountKey=",)),
    _detect_secrets_rule(GitHubTokenDetector(), ("_",)),
    _detect_secrets_rule(GitLabTokenDetector(), ("gl", "GR1348941")),
    _detect_secrets_rule(SlackDetector()),
    _detect_secrets_rule(StripeDetector(), ("k_live_",)),
    _detect_secrets_rule(TwilioKeyDetector(), ("AC", "SK")),
    Rule(str(JwtTokenDetector.secret_type), _jwt, ("eyJ",)),
    Rule(str(NpmDetector.secret_type), _npm, ("_authToken=",)),
    _detect_secrets_rule(PypiTokenDetector(), ("pypi-AgE",)),
    _detect_secrets_rule(SendGridDetector(), ("SG.",)),
    _detect_secrets_rule(MailchimpDetector(), ("-us",)),
    _detect_secrets_rule(TelegramBotTokenDetector(), (":",)),
    _detect_secrets_rule(DiscordBotTokenDetector(), (".",)),
    Rule(str(OpenAIDetector.secret_type), _openai_legacy, ("T3BlbkFJ",)),
    _detect_secrets_rule(ArtifactoryDetector(), ("AKC", "AP")),
    _detect_secrets_rule(SquareOAuthDetector(), ("sq0csp-",)),
)

# Catch-alls, tried after the precise rules so those keep naming what they know.
_LATE_RULES = (
    # password = "s3cr3t!", DB_PASSWORD: 's3cr3t!': a quoted value without spaces (so prose and
    # quoted sentences pass) that is not a placeholder; PASSWORD=s3cr3t99 unquoted when it holds
    # letters and digits (so "password: unknown" passes). Late: `password = pypi-…` is a PyPI token.
    Rule("Password Assignment", _password_assignment, ("assw", "ASSW")),
    # every PEM private key, ENCRYPTED PRIVATE KEY included (detect-secrets lists a few kinds only)
    Rule(
        "PEM Private Key",
        _regex(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"),
        ("PRIVATE KEY",),
    ),
    # sk-<48>: OpenAI's older secret keys (detect-secrets knows only those holding T3BlbkFJ, and
    # names them first); at least one digit, so no hyphenated word of 48 letters is one
    Rule(
        "OpenAI API Key",
        _regex(r"(?<![A-Za-z0-9_-])sk-(?=[A-Za-z]{0,47}[0-9])[A-Za-z0-9]{48}(?![A-Za-z0-9_-])"),
        ("sk-",),
    ),
    # SECRET_KEY=..., API_KEY: ..., "SecretAccessKey": "...", client_secret=...: a value of 10+
    # characters, letters and digits both, that is no placeholder or environment reference
    Rule("Secret Assignment", _secret_assignment),
)

# Our rules first: they name the newer formats more precisely (a sk-proj- key also holds T3BlbkFJ).
RULES: tuple[Rule, ...] = _OWN_RULES + _DETECT_SECRETS_RULES + _LATE_RULES


def scan_secrets(text: str) -> str | None:
    """The name of the first rule whose credential format occurs in `text`, or None.

    Pure and thread-safe; linear in the length of `text`.
    """
    for rule in RULES:
        if rule.matches(text):
            return rule.name
    return None


def new_secret(before: str | None, after: str) -> str | None:
    """The first rule with a credential in `after` that `before` does not hold, or None.

    A write is scanned as the whole file it produces, so a key split over two appends or joined by
    an edit is found; a credential the file held already (stored before a rule existed) does not
    block unrelated changes to it. Linear in the length of both texts.
    """
    if scan_secrets(after) is None:
        return None
    for rule in RULES:
        found = set(rule.search(after))
        if found and (before is None or not found <= set(rule.search(before))):
            return rule.name
    return None


def refuse_secrets(text: str | None, field: str) -> None:
    """Raises SecretDetected (details `field`, `rule`) when `text` (a message, a description) holds
    a credential: they end up in git history and README.md just like file content."""
    rule = scan_secrets(text) if text else None
    if rule is not None:
        raise SecretDetected(
            f"the {field} holds what looks like a credential ({rule}); remove it and send it again "
            "(never store secrets, credentials or tokens in a KB)",
            field=field,
            rule=rule,
        )
