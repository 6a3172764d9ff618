"""Credential detection: detect-secrets' provider plugins plus rules for newer key formats."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

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

__all__ = ["RULES", "scan_secrets"]

# Why only these plugins:
# - No KeywordDetector or high-entropy plugins: notes hold sha256 digests, commit ids and the word
#   "password" all the time.
# - No Cloudant, IBM Cloud IAM, IBM COS HMAC or SoftLayer: they are keyword detectors in disguise
#   (`key = <value of some length>`), and their regexes backtrack cubically on a run of spaces after
#   the keyword ("key" + 1 KiB of spaces takes 8 s), which any write could trigger.
# - No BasicAuth (`scheme://user:pass@host`): notes are full of example connection strings.
# - No IPPublic: an address is not a credential.
#
# Thread safety: we never call `analyze_line` (it reads detect-secrets' global settings to decide
# whether to verify secrets over the network). `analyze_string` and the compiled patterns are pure,
# so one shared instance of each plugin serves every thread.


@dataclass(frozen=True)
class Rule:
    """One credential format: `name` is what SecretDetected reports as `rule`."""

    name: str
    found: Callable[[str], bool]
    # Substrings of which every match holds at least one; a text holding none is skipped unscanned.
    needles: tuple[str, ...] = ()

    def matches(self, text: str) -> bool:
        if self.needles and not any(needle in text for needle in self.needles):
            return False
        return self.found(text)


def _plugin(plugin: RegexBasedDetector) -> Callable[[str], bool]:
    """Run a plugin whose patterns scan in linear time on the whole text at once.

    None of the patterns we run this way crosses a line break except as a `\\s` boundary (where
    line-by-line scanning has `^` or `$`), so scanning the whole text finds what scanning it line
    by line would, with one regex pass per pattern.
    """

    def found(text: str) -> bool:
        return any(True for _ in plugin.analyze_string(text))

    return found


def _first_starts(
    text: str, anchor: str, pattern: re.Pattern[str], skip: Callable[[str, int], int]
) -> Iterator[str]:
    """The matches `pattern.findall` would see, in linear time, for patterns that backtrack badly.

    The plugin's own pattern is tried only at the first `anchor` of each stretch that `skip` ends:
    for the patterns below, when that try fails every later start in the same stretch fails too,
    so `findall`'s retries there (quadratic: "eyJ" * 90_000 takes 27 s) are skipped.
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


def _jwt(text: str) -> bool:
    # JwtTokenDetector yields its matches filtered by `is_formally_valid` (header and payload decode
    # as base64 JSON).
    candidates = _first_starts(text, "eyJ", _JWT_PATTERN, _run_end(_JWT_RUN))
    return any(_JWT.is_formally_valid(token) for token in candidates)


def _npm(text: str) -> bool:
    # `//.+/:_authToken=...`: a later "//" on the same line can only match if the first one does.
    return next(_first_starts(text, "//", _NPM_PATTERN, _line_end), None) is not None


def _openai_legacy(text: str) -> bool:
    return next(_first_starts(text, "sk-", _OPENAI_PATTERN, _run_end(_OPENAI_RUN)), None) is not None


def _regex(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern)

    def found(text: str) -> bool:
        return compiled.search(text) is not None

    return found


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

# Our rules first: they name the newer formats more precisely (a sk-proj- key also holds T3BlbkFJ).
RULES: tuple[Rule, ...] = _OWN_RULES + _DETECT_SECRETS_RULES


def scan_secrets(text: str) -> str | None:
    """The name of the first rule whose credential format occurs in `text`, or None.

    Pure and thread-safe; linear in the length of `text`.
    """
    for rule in RULES:
        if rule.matches(text):
            return rule.name
    return None
