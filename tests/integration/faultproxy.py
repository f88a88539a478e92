# SPDX-License-Identifier: MIT
"""A fault-injecting HTTP reverse proxy on loopback, between tensorfs and an upstream server.

Each request is forwarded (Host header unchanged, so SigV4 signatures stay valid) unless the
proxy decides to fail it: an immediate 503 (S3 SlowDown) or 429, a connection reset in the
middle of the body, a body cut short of its Content-Length, corrupted body bytes, or a stall
longer than the client's timeout. Which requests fail comes from a seeded RNG, the kinds take
turns (every kind is injected once enough requests failed), and a request that was
failed is never failed again on its next attempt (same method, path and Range), so every
request succeeds within two attempts: the test is deterministic in outcome.

`counts["requests_in_flight_max"]` is the most requests it was answering at once.
`retag_after_heads=N` gives every reply after the N-th HEAD request another ETag, as if the
object had been replaced (same size) between one fetch of it and the next.
`persistent_corrupt` corrupts every chunk object's body (tensorfs object type 1) on every
attempt, to check that damage that does not go away reads as EIO, never as wrong bytes;
`corrupt_path=S` does the same to every GET body of a path that contains S (counted in
`persistent_corrupt` too). `kms` makes replies look like those of an object that S3 encrypts
with a KMS key: `x-amz-server-side-encryption: aws:kms`, and an ETag of 32 hex digits that is
not the MD5 of the object's bytes.
The proxy runs in its own process (FaultProxy starts it): a test that reads a mount through
mmap holds Python's GIL while the kernel waits for the daemon, so a proxy thread inside pytest
would stall with it. Loopback only; stop() ends the process and collects its counters."""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("503", "429", "reset", "truncate", "corrupt", "stall")


def _die_with_parent():
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class FaultProxy:
    """The proxy process, seen from a test: .port, .endpoint, .counts (after stop())."""

    def __init__(self, upstream_port, rate=0.0, faults=FAULTS, seed=1, stall_s=3.0,
                 delay_s=0.0, persistent_corrupt=False, workdir=None, retag_after_heads=0,
                 corrupt_path=None, kms=False):
        import tempfile
        self._dir = workdir or tempfile.mkdtemp(prefix="faultproxy-")
        self._stats = os.path.join(self._dir, f"faultproxy-{os.getpid()}-{id(self)}.json")
        cmd = [sys.executable, os.path.abspath(__file__), str(upstream_port),
               "--rate", str(rate), "--faults", ",".join(faults), "--seed", str(seed),
               "--stall", str(stall_s), "--delay", str(delay_s), "--stats", self._stats]
        if persistent_corrupt:
            cmd.append("--persistent-corrupt")
        if retag_after_heads:
            cmd += ["--retag-after-heads", str(retag_after_heads)]
        if corrupt_path:
            cmd += ["--corrupt-path", corrupt_path]
        if kms:
            cmd.append("--kms")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     text=True, preexec_fn=_die_with_parent)
        line = self.proc.stdout.readline()
        if not line.startswith("port "):
            self.proc.kill()
            raise RuntimeError(f"fault proxy did not start: {line!r}")
        self.port = int(line.split()[1])
        self.counts = {}

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def snapshot(self):
        """The counters so far, without stopping the proxy."""
        try:
            os.unlink(self._stats)
        except FileNotFoundError:
            pass
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(200):
            try:
                with open(self._stats) as f:
                    return json.load(f)
            except (OSError, ValueError):
                time.sleep(0.01)
        raise RuntimeError("fault proxy did not report its counters")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc.stdout.close()
        try:
            with open(self._stats) as f:
                self.counts = json.load(f)
        except (OSError, ValueError):
            self.counts = {}

    def injected(self):
        return sum(self.counts.get(f, 0) for f in FAULTS)


class Proxy:
    def __init__(self, upstream_port, rate=0.0, faults=FAULTS, seed=1, stall_s=3.0,
                 delay_s=0.0, methods=("GET", "HEAD")):
        self.upstream_port = upstream_port
        self.rate = rate
        self.faults = tuple(faults)
        self.stall_s = stall_s
        self.delay_s = delay_s  # added to every request (a slow link)
        self.methods = methods
        self.persistent_corrupt = False
        self.corrupt_path = None
        self.kms = False
        # Past this many HEAD requests (0: never), every reply gives the object another ETag:
        # as if it were replaced, same size, between one fetch and the next.
        self.retag_after_heads = 0
        self.heads = 0  # protected by lock
        self.rng = random.Random(seed)
        self.turn = 0  # the fault kind to inject next; protected by lock
        self.lock = threading.Lock()
        self.last_faulted = set()  # request keys whose previous attempt was failed
        self.counts = {f: 0 for f in FAULTS}
        self.counts["requests"] = 0
        self.counts["ranged"] = 0  # GETs with a Range header
        self.counts["persistent_corrupt"] = 0
        self.counts["object_gets"] = 0  # GETs of tensorfs objects (".../objects/...") answered
        self.counts["object_bytes"] = 0  # their body bytes
        # The most objects with a GET in flight at once (two ranges of one object count once).
        self.counts["objects_in_flight_max"] = 0
        self.counts["requests_in_flight_max"] = 0
        self.in_flight = {}  # object path -> GETs of it in flight; protected by lock
        self.requests = 0  # requests in flight; protected by lock
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                proxy._handle(self)

            do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self._local = threading.local()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def injected(self):
        return sum(self.counts[f] for f in FAULTS)

    # -- internals ----------------------------------------------------------------------------
    def _decide(self, method, key):
        with self.lock:
            self.counts["requests"] += 1
            if method == "GET" and key[2]:
                self.counts["ranged"] += 1
            if key in self.last_faulted:
                self.last_faulted.discard(key)
                return None
            if method not in self.methods or self.rng.random() >= self.rate:
                return None
            # The kinds take turns, so that every kind is injected once a few faults were:
            # the next one that applies to this request. HEAD has no body to damage, and a
            # listing no checksum to catch corruption (TLS's job on S3).
            n = len(self.faults)
            f = "503"
            for i in range(n):
                k = self.faults[(self.turn + i) % n]
                if method == "HEAD" and k in ("reset", "truncate", "corrupt"):
                    continue
                if k == "corrupt" and "?" in key[1]:
                    continue
                f = k
                self.turn = (self.turn + i + 1) % n
                break
            self.last_faulted.add(key)
            return f

    def _count(self, f):
        with self.lock:
            self.counts[f] += 1

    def _upstream(self, h):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
            self._local.conn = conn
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else None
        hdrs = {k: v for k, v in h.headers.items() if k.lower() not in ("connection",)}
        for attempt in range(2):
            try:
                conn.request(h.command, h.path, body=body, headers=hdrs)
                r = conn.getresponse()
                data = r.read()
                return r.status, r.getheaders(), data
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
                self._local.conn = conn
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _send(self, h, status, headers, body, content_length=None):
        if h.command == "HEAD" and content_length is None:
            # A HEAD reply has no body but the object's length.
            content_length = next((v for k, v in headers if k.lower() == "content-length"), 0)
        h.send_response_only(status)
        if getattr(h, "retag", False):
            headers = [(k, '"replaced"' if k.lower() == "etag" else v) for k, v in headers]
        if self.kms and status < 300:
            import hashlib
            headers = [(k, '"%s"' % hashlib.md5(b"kms" + v.encode()).hexdigest()
                        if k.lower() == "etag" else v) for k, v in headers]
            headers.append(("x-amz-server-side-encryption", "aws:kms"))
        for k, v in headers:
            if k.lower() not in ("content-length", "connection", "transfer-encoding",
                                 "keep-alive", "date"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(body) if content_length is None
                                            else content_length))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
        h.wfile.flush()

    def _error(self, h, status, code):
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>injected</Message></Error>").encode()
        self._send(h, status, [("Content-Type", "application/xml")], body)

    def _handle(self, h):
        obj = h.path.split("?")[0] if h.command == "GET" and "/objects/" in h.path else None
        with self.lock:
            self.requests += 1
            self.counts["requests_in_flight_max"] = max(
                self.counts["requests_in_flight_max"], self.requests)
            if obj:
                self.in_flight[obj] = self.in_flight.get(obj, 0) + 1
                self.counts["objects_in_flight_max"] = max(
                    self.counts["objects_in_flight_max"], len(self.in_flight))
        try:
            self._handle_one(h)
        finally:
            with self.lock:
                self.requests -= 1
                if obj:
                    self.in_flight[obj] -= 1
                    if not self.in_flight[obj]:
                        del self.in_flight[obj]

    def _handle_one(self, h):
        key = (h.command, h.path, h.headers.get("Range"))
        fault = self._decide(h.command, key)
        with self.lock:
            self.heads += h.command == "HEAD"
            h.retag = bool(self.retag_after_heads) and self.heads > self.retag_after_heads
        if self.delay_s:
            time.sleep(self.delay_s)
        if fault in ("503", "429"):
            self._count(fault)
            n = int(h.headers.get("Content-Length") or 0)
            if n:
                h.rfile.read(n)
            self._error(h, int(fault), "SlowDown" if fault == "503" else "TooManyRequests")
            return
        try:
            status, headers, body = self._upstream(h)
        except (OSError, http.client.HTTPException):
            self._error(h, 502, "BadGateway")
            return
        if h.command == "GET" and status in (200, 206) and "/objects/" in h.path:
            with self.lock:
                self.counts["object_gets"] += 1
                self.counts["object_bytes"] += len(body)
        chunk = (self.persistent_corrupt and h.command == "GET" and status in (200, 206)
                 and len(body) > 64 and body[:4] == b"TFSO" and body[6] == 1)
        chunk = chunk or (self.corrupt_path is not None and self.corrupt_path in h.path
                          and h.command == "GET" and status in (200, 206) and len(body) > 0)
        if chunk:
            self._count("persistent_corrupt")
            body = bytearray(body)
            body[len(body) // 2] ^= 0x5A
            self._send(h, status, headers, bytes(body))
            return
        if fault and (h.command != "GET" or status >= 300 or len(body) < 16):
            fault = "503" if fault != "stall" else fault
            if fault == "503":
                self._count("503")
                self._error(h, 503, "SlowDown")
                return
        if fault == "stall":
            self._count("stall")
            time.sleep(self.stall_s)
            try:
                self._send(h, status, headers, body)
            except OSError:
                pass
            h.close_connection = True
            return
        if fault == "corrupt":
            self._count("corrupt")
            body = bytearray(body)
            body[self.rng.randrange(len(body))] ^= 0xFF
            self._send(h, status, headers, bytes(body))
            return
        if fault in ("reset", "truncate"):
            self._count(fault)
            self._send(h, status, headers, body[:len(body) // 2], content_length=len(body))
            if fault == "reset":
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
            h.close_connection = True
            return
        self._send(h, status, headers, body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("upstream_port", type=int)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stall", type=float, default=3.0)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--persistent-corrupt", action="store_true")
    ap.add_argument("--retag-after-heads", type=int, default=0)
    ap.add_argument("--corrupt-path")
    ap.add_argument("--kms", action="store_true")
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    p = Proxy(a.upstream_port, rate=a.rate, faults=[f for f in a.faults.split(",") if f],
              seed=a.seed, stall_s=min(a.stall, 30.0), delay_s=min(a.delay, 5.0))
    p.persistent_corrupt = a.persistent_corrupt
    p.retag_after_heads = a.retag_after_heads
    p.corrupt_path = a.corrupt_path
    p.kms = a.kms
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def dump(*_):
        with p.lock:
            counts = dict(p.counts)
        with open(a.stats + ".tmp", "w") as f:
            json.dump(counts, f)
        os.replace(a.stats + ".tmp", a.stats)

    signal.signal(signal.SIGUSR1, dump)
    print(f"port {p.port}", flush=True)
    # Bounded: a proxy nobody stops ends by itself after an hour.
    done.wait(timeout=3600)
    p.stop()
    with open(a.stats, "w") as f:
        json.dump(p.counts, f)


if __name__ == "__main__":
    main()
