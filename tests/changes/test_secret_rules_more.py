"""Two more secret rules: OpenAI's sk- + 48 keys and quoted password assignments, without flagging prose."""

from __future__ import annotations

import secrets
import string

import pytest

from kbserver.changes.secrets import scan_secrets


def _key() -> str:
    alphabet = string.ascii_letters + string.digits
    return "sk-" + "".join(secrets.choice(alphabet) for _ in range(47)) + "7"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (f"OPENAI_API_KEY={_key()}", "OpenAI API Key"),
        (f"use {_key()} for the bot", "OpenAI API Key"),
        ('password = "Tr0ub4dor&3"', "Password Assignment"),
        ("DB_PASSWORD: 'n0t-a-pl4ceholder'", "Password Assignment"),
        ('{"password": "hK9#mq2!zz"}', "Password Assignment"),
        ('PASSWD="correcthorsebattery"', "Password Assignment"),
    ],
)
def test_found(text: str, rule: str) -> None:
    assert scan_secrets(text) == rule


@pytest.mark.parametrize(
    "text",
    [
        "the password = the one on the card",
        'the password is "the one on the card"',
        "we use sk-learn and scikit-learn for the model",
        "sk-" + "a" * 48,  # letters only: a made-up word, not a key
        "sk-proj is not a key, sk-1234 neither",
        'password = "changeme"',
        'password = "${DB_PASSWORD}"',
        "password: '<password>'",
        'password = "****"',
        'password = ""',
        'password = "short"',
        "Passwords must be at least 12 characters long.",
        "Reset the password: open Settings, then Security.",
    ],
)
def test_prose_and_placeholders_pass(text: str) -> None:
    assert scan_secrets(text) is None
