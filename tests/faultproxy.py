"""A TCP proxy on loopback that can stop forwarding while every socket stays open (a silent network).

`FaultProxy(host, port)` listens on 127.0.0.1 and a free port and forwards each connection to the
target. `hold()` stops forwarding in both directions (bytes read stay in the proxy, new connections
are accepted and go nowhere, nobody sees a FIN or a reset: what a node sees when its packets are
dropped); `release()` forwards everything held, in order, so TCP's guarantees stand.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.helpers import free_port

__all__ = ["FaultProxy"]


class FaultProxy:
    """Forwards 127.0.0.1:`port` to `target_host`:`target_port`; `hold()` and `release()` the flow."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._flowing = threading.Event()
        self._flowing.set()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._server.settimeout(0.2)
        threading.Thread(target=self._accept, name="faultproxy-accept", daemon=True).start()

    def hold(self) -> None:
        """Stop forwarding: every byte from now on waits in the proxy, every socket stays open."""
        self._flowing.clear()

    def release(self) -> None:
        """Forward again, what was held first."""
        self._flowing.set()

    def close(self) -> None:
        self._stop.set()
        self._flowing.set()
        self._server.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _wait_flowing(self) -> bool:
        """Block while held; False once the proxy closes."""
        while not self._flowing.wait(0.2):
            if self._stop.is_set():
                return False
        return not self._stop.is_set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        if not self._wait_flowing():  # held: the client's connection is open, and nothing answers
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._sockets += [client, upstream]
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not self._wait_flowing():
                return
            if not data:  # EOF or error: passed on only while flowing, as a network would
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return
            try:
                dst.sendall(data)
            except OSError:
                return
