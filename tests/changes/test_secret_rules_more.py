"""Two more secret rules: OpenAI's sk- + 48 keys and password assignments (quoted, or bare as in env files
and YAML), without flagging prose."""

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
        ("password=hunter2x", "Password Assignment"),
        ("password: hunter2x", "Password Assignment"),
        ("PASSWORD=hunter2x", "Password Assignment"),
        ("# .env\nexport DB_PASSWORD=s3cret99  # prod\n", "Password Assignment"),
        ("smtp:\n  password: Xk9fj2lq, user: bob\n", "Password Assignment"),
        ("db.password=aGVsbG8xMjM=\n", "Password Assignment"),
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
        "the password is in the vault",
        "password=<your password>",
        "password=",
        "password: see 1Password",
        "password: 1Password",
        "password: unknown",
        "password: ********",
        "PASSWORD=${DB_PASSWORD}",
        "password: !vault |",
        "password=hunter2",  # the folklore example, not anyone's password
        "password: https://vault.example.org/v1/db",
        "password_min_length=12",
        "password = os.environ['DB_PASSWORD']",
    ],
)
def test_prose_and_placeholders_pass(text: str) -> None:
    assert scan_secrets(text) is None
