"""The client address behind trusted proxies: only their headers believed, the rightmost untrusted
address taken, a client's own entries ignored."""

from __future__ import annotations

import pytest

from kbserver.core.clients import TrustedProxies, parse_proxies

LB = "10.0.0.5"


@pytest.mark.parametrize(
    ("trusted", "peer", "xff", "fwd", "client"),
    [
        ([], LB, ["1.2.3.4"], [], LB),  # nobody trusted: the socket's peer, whatever it says
        (["10.0.0.0/8"], "192.0.2.1", ["1.2.3.4"], [], "192.0.2.1"),  # an untrusted peer's header
        ([LB], LB, ["1.2.3.4"], [], "1.2.3.4"),
        (["10.0.0.0/8"], LB, ["6.6.6.6, 1.2.3.4"], [], "1.2.3.4"),  # the client's own entry ignored
        (["10.0.0.0/8"], LB, ["6.6.6.6", "1.2.3.4, 10.0.0.7"], [], "1.2.3.4"),  # two proxies, two headers
        (["10.0.0.0/8"], LB, ["1.2.3.4:5678"], [], "1.2.3.4"),
        (["10.0.0.0/8"], LB, ["[2001:db8::1]:80"], [], "2001:db8::1"),
        (["10.0.0.0/8"], LB, ["garbage"], [], LB),  # not what a proxy writes: believe nothing
        (["10.0.0.0/8"], LB, ["10.0.0.9"], [], "10.0.0.9"),  # every hop trusted: the leftmost
        (["10.0.0.0/8"], LB, [], ['for=6.6.6.6, for="1.2.3.4:80";proto=https'], "1.2.3.4"),
        (["10.0.0.0/8"], LB, [], ['for="[2001:db8::17]:4711"'], "2001:db8::17"),
        (["10.0.0.0/8"], LB, ["1.2.3.4"], ["for=6.6.6.6"], "1.2.3.4"),  # X-Forwarded-For first
        (["*"], "192.0.2.1", ["1.2.3.4"], [], "1.2.3.4"),
        (["127.0.0.1"], "::ffff:127.0.0.1", ["1.2.3.4"], [], "1.2.3.4"),
        (["10.0.0.0/8"], LB, [], [], LB),  # a trusted peer that forwarded nothing is the client
    ],
)
def test_the_client_of_a_request(
    trusted: list[str], peer: str, xff: list[str], fwd: list[str], client: str
) -> None:
    assert TrustedProxies(trusted).client(peer, xff, fwd) == client


def test_a_bad_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="neither an IP address nor a CIDR"):
        parse_proxies(["10.0.0.0/8", "haproxy"])
    assert parse_proxies(["*", "x"]) is None
