"""Credentials the red team got past the scanner: URLs with an empty user name, SECRET_KEY= and
API_KEY= assignments, AWS secret keys and session tokens in JSON, Slack app tokens, Stripe webhook
secrets, PuTTY keys and OAuth client secrets; and the prose around them that must still pass."""

from __future__ import annotations

import base64
import random
import string

import pytest

from kbserver.changes import scan_secrets

# Generated at run time, so no real-looking key sits in the repository.
_rng = random.Random(20261204)
ALNUM = string.ascii_letters + string.digits


def _r(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _putty(version: int) -> str:
    public = base64.b64encode(_rng.randbytes(51)).decode()
    private = base64.b64encode(_rng.randbytes(48)).decode()
    return (
        f"PuTTY-User-Key-File-{version}: ssh-ed25519\nEncryption: none\nComment: ada@laptop\n"
        f"Public-Lines: 2\n{public[:64]}\n{public[64:]}\nPrivate-Lines: 1\n{private}\n"
        f"Private-MAC: {_r(64, '0123456789abcdef')}\n"
    )


FOUND = [
    "REDIS_URL=redis://:" + _r(24) + "@cache.prod.internal:6379/0",
    "postgres://:" + _r(20) + "@db.internal/app",
    "postgresql://:" + _r(20) + "@10.0.0.7:5432/app",
    "amqp://:" + _r(18) + "@rabbit.internal:5672/vhost",
    "git clone https://:" + _r(40) + "@git.company.com/team/repo.git",
    "SECRET_KEY=django-insecure-" + _r(40, ALNUM + "!@#^*-_"),
    "SECRET_KEY = '" + _r(50) + "'",
    'API_KEY="' + _r(32) + '"',
    "export API_KEY=" + _r(32),
    "OPENWEATHER_API_KEY: " + _r(32, "0123456789abcdef"),
    "api-key: " + _r(28),
    '{"AccessKeyId": "ASIA'
    + _r(16, string.ascii_uppercase + string.digits)
    + '", "SecretAccessKey": "'
    + _r(40, ALNUM + "/+")
    + '"}',
    '{"SecretAccessKey": "' + _r(40, ALNUM + "/+") + '"}',
    "aws_session_token = IQoJb3JpZ2luX2VjE" + _r(300, ALNUM + "/+") + "==",
    '"SessionToken": "FwoGZXIvYXdzE' + _r(300, ALNUM + "/+") + '"',
    "SLACK_APP_TOKEN=xapp-1-A0"
    + _r(9, string.ascii_uppercase + string.digits)
    + "-"
    + _r(13, string.digits)
    + "-"
    + _r(64, "0123456789abcdef"),
    "STRIPE_WEBHOOK_SECRET=whsec_" + _r(32),
    "endpoint secret whsec_" + _r(32) + " for the webhook",
    _putty(2),
    _putty(3),
    '"client_secret": "' + _r(24, ALNUM + "-_") + '"',
    "GOOGLE_CLIENT_SECRET=GOCSPX-" + _r(28, ALNUM + "-_"),
    "client_secret=" + _r(40),
]


@pytest.mark.parametrize("text", FOUND)
def test_found(text: str) -> None:
    assert scan_secrets(f"notes\n{text}\nmore notes\n") is not None


PROSE = [
    "SECRET_KEY=<your key>",
    "SECRET_KEY=<your secret key here>",
    "SECRET_KEY=${SECRET_KEY}",
    "SECRET_KEY=$SECRET_KEY",
    'SECRET_KEY = os.environ["SECRET_KEY"]',
    "SECRET_KEY = os.environ.get('SECRET_KEY')",
    "API_KEY=process.env.API_KEY",
    "API_KEY=",
    "API_KEY=changeme",
    "API_KEY: your-api-key",
    "API_KEY=xxxxxxxxxxxxxxxx",
    'api_key = "YOUR_API_KEY"',
    "Set API_KEY to the key from the dashboard.",
    "The secret key is in the vault; SECRET_KEY is read from the environment.",
    "client_secret: see the vault",
    "client_secret=<client secret>",
    '"client_secret": "{{ client_secret }}"',
    "The OAuth client_secret and client_id come from the provider's console.",
    "redis://:${REDIS_PASSWORD}@redis:6379 and postgres://:password@localhost/db",
    "https://:token@example.com/repo.git",
    "xapp- is the prefix of Slack app tokens; whsec_ is Stripe's webhook secret prefix",
    "PuTTY-User-Key-File-3 is the first line of a .ppk file.",
    "aws_session_token is set by `aws sts assume-role`; SecretAccessKey comes with it.",
    '{"SecretAccessKey": "<secret>", "SessionToken": "..."}',
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_passes(text: str) -> None:
    assert scan_secrets(text) is None
