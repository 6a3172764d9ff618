"""git's pkt-line framing, and what the edge must know of a protocol v2 request: its command and wants."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DELIM", "FLUSH", "V2Request", "encode", "error_packet", "parse_v2_request", "split"]

FLUSH = 0  # "0000": end of a message
DELIM = 1  # "0001": end of a section (protocol v2)
_RESPONSE_END = 2  # "0002": end of a response (protocol v2, stateless)

_OID = re.compile(rb"[0-9a-fA-F]{40}")


def encode(payload: bytes) -> bytes:
    """One data packet: four hex digits of length (including themselves), then the payload."""
    return b"%04x" % (len(payload) + 4) + payload


def error_packet(message: str) -> bytes:
    """An `ERR` packet: git clients print it as "remote error: MESSAGE" and stop."""
    return encode(f"ERR {message}\n".encode())


def split(data: bytes) -> list[bytes | int]:
    """Every packet of `data`: a payload (trailing newline removed) or FLUSH/DELIM/2.

    Raises ValueError on a malformed length or a truncated packet, where git would die too.
    """
    packets: list[bytes | int] = []
    pos = 0
    while pos < len(data):
        head = data[pos : pos + 4]
        if len(head) < 4 or not re.fullmatch(rb"[0-9a-fA-F]{4}", head):
            raise ValueError("bad pkt-line length")
        size = int(head, 16)
        if size in (FLUSH, DELIM, _RESPONSE_END):
            packets.append(size)
            pos += 4
            continue
        if size < 4 or pos + size > len(data):
            raise ValueError("bad or truncated pkt-line")
        payload = data[pos + 4 : pos + size]
        packets.append(payload[:-1] if payload.endswith(b"\n") else payload)
        pos += size
    return packets


@dataclass(frozen=True)
class V2Request:
    """The parts of a protocol v2 request that the edge checks before C git sees it."""

    command: str | None
    wants: tuple[str, ...]  # object ids, lowercase hex
    want_refs: bool  # `want-ref` lines (refused: uploadpack.allowRefInWant stays off)


def parse_v2_request(body: bytes) -> V2Request:
    """The command and every `want` of one stateless v2 request. Raises ValueError when malformed.

    Deliberately broader than git: a `want ` line is collected wherever it stands, so nothing git
    would treat as a want can slip past the check. git reads the first 40 hex digits after
    `want ` as the object id (get_oid_hex) and so does this.
    """
    packets = split(body)
    command: str | None = None
    wants: list[str] = []
    want_refs = False
    in_capabilities = True
    for packet in packets:
        if isinstance(packet, int):
            in_capabilities = False  # a delim (or flush) ends the capability section
            continue
        if in_capabilities and packet.startswith(b"command="):
            if command is not None:
                raise ValueError("more than one command")
            command = packet[len(b"command=") :].decode("utf-8", "replace")
        elif packet.startswith(b"want-ref "):
            want_refs = True
        elif packet.startswith(b"want "):
            oid = packet[len(b"want ") : len(b"want ") + 40]
            if not _OID.fullmatch(oid):
                raise ValueError("a want without an object id")
            wants.append(oid.decode().lower())
    return V2Request(command, tuple(wants), want_refs)
