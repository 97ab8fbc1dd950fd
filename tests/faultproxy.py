"""A TCP proxy on 127.0.0.1 that tests put between a client and a server to break things:
kill it (every connection reset, new ones refused) and restart it, black-hole traffic (no
reset, bytes dropped), stall the open connections (bytes held, then delivered when it heals, even
those a client sent before it gave the connection up: a request that lands after its
retry), add
latency, or reset the connections while still listening.

Threads only, every wait bounded. Linux facts it relies on: closing a listening socket
does not wake a thread blocked in accept(), so the listener is shut down first; closing a
socket with SO_LINGER 0 sends a reset, which a client sees at once.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from types import TracebackType

HOST = "127.0.0.1"
POLL_S = 0.05
CHUNK = 65536
JOIN_S = 5.0
STALL_S = 60.0
"""The longest a stalled connection's bytes wait for the stall to end."""


def _reset(sock: socket.socket) -> None:
    """Close with a reset (RST), not a polite FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Pair:
    """One client connection and its upstream connection, pumped both ways."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client, self.upstream = client, upstream
        self.black = proxy.black_holed
        self.stalled = proxy.stalling
        self.closed = threading.Event()
        # set before either pump starts: one that ends at once closes both sockets, and the
        # other's settimeout then failed with EBADF in its thread
        client.settimeout(POLL_S)
        upstream.settimeout(POLL_S)
        self.threads = [
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True),
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        held: list[bytes] = []  # what a stall holds, in order
        while not self.closed.is_set():
            if held and not self.stalled and not self._deliver(held, sink):
                break
            try:
                data = source.recv(CHUNK)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data or not self._forward(data, held, sink):
                break
        if held:  # the sender went away during a stall: what it sent still lands after it
            deadline = time.monotonic() + STALL_S
            while self.stalled and time.monotonic() < deadline:
                time.sleep(POLL_S)
            self._deliver(held, sink)
            time.sleep(POLL_S)  # let the far end read it before the reset
        self.reset()

    def _forward(self, data: bytes, held: list[bytes], sink: socket.socket) -> bool:
        """Pass `data` on, drop it (black hole) or hold it (stall); False once `sink` failed."""
        if self.black or self.proxy.black_holed:
            self.black = True  # once black-holed, this connection stays dead
            return True
        if held or self.stalled:
            held.append(data)
            return True
        delay = self.proxy.delay_s
        if delay:
            time.sleep(delay)
        try:
            sink.sendall(data)
        except OSError:
            return False
        return True

    @staticmethod
    def _deliver(held: list[bytes], sink: socket.socket) -> bool:
        try:
            sink.sendall(b"".join(held))
        except OSError:
            return False
        held.clear()
        return True

    def reset(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        _reset(self.client)
        _reset(self.upstream)

    def join(self) -> None:
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(JOIN_S)


class FaultProxy:
    """Pipes connections on 127.0.0.1:`port` to 127.0.0.1:`target_port`."""

    def __init__(self, target_port: int, *, port: int = 0) -> None:
        self.target_port = target_port
        self.port = port
        self.black_holed = False
        self.stalling = False
        """Connections opened now start stalled."""
        self.delay_s = 0.0
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self.accepted = 0
        self.start()

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def connections(self) -> int:
        with self._lock:
            return sum(1 for p in self._pairs if not p.closed.is_set())

    def start(self) -> None:
        """Listen (again, on the same port once it had one)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    restart = start

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # shut down
            try:
                upstream = socket.create_connection((HOST, self.target_port), timeout=2)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self.accepted += 1
                self._pairs = [p for p in self._pairs if not p.closed.is_set()]
                self._pairs.append(_Pair(self, client, upstream))

    def kill(self) -> None:
        """Stop listening and reset every connection: clients see an error at once, and
        new connections are refused until `restart()`."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._acceptor is not None:
            self._acceptor.join(JOIN_S)
            self._acceptor = None
        self.reset_all()

    def reset_all(self) -> None:
        """Reset every current connection, still listening (a network blip)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.reset()
        for pair in pairs:
            pair.join()

    def blackhole(self, on: bool = True) -> None:
        """Drop every byte both ways without closing anything (packets lost, no reset).
        Connections black-holed stay dead; those opened after `blackhole(False)` work."""
        self.black_holed = on

    def stall(self, on: bool = True, *, later: bool = True) -> None:
        """Hold every byte of the connections open now, both ways, and (with `later`) of
        those opened from now on: nothing closed, nothing lost. `stall(False)` delivers it
        all in order, even what a client sent into a connection it has since given up on,
        as a healed network does. `stall(later=False)` lets new connections pass while the
        held ones stay held: a client's retry on a new connection lands first."""
        self.stalling = on and later
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.stalled = on

    def latency(self, seconds: float) -> None:
        """Delay every chunk forwarded, both ways (0: none)."""
        self.delay_s = seconds

    def close(self) -> None:
        self.kill()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
