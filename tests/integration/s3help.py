# SPDX-License-Identifier: MIT
"""Helpers for the remote-store tests: s3rver and nginx on loopback, lakes behind them.

Tools that are missing locally make a test SKIP with the reason; with TENSORFS_REQUIRE_S3=1 (set
by .ci/run, which installs them) they make it FAIL instead. Every server started here listens on
127.0.0.1 only, on a free port, and is stopped when its context ends."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, Lake

REQUIRE = os.environ.get("TENSORFS_REQUIRE_S3") == "1"
# s3rver with S3's atomic, read-after-write consistent object writes (tests/s3/s3rver.js).
S3RVER = os.environ.get("TENSORFS_S3RVER") or str(REPO_ROOT / "tests/s3/s3rver.js")
S3RVER_MODULE = REPO_ROOT / "tests/s3/node_modules/s3rver"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# s3rver's built-in account; it checks SigV4 signatures made with it.
ACCESS_KEY = "S3RVER"
SECRET_KEY = "S3RVER"


def _die_with_parent():
    """preexec_fn: the server gets SIGTERM when pytest dies, whatever killed it."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def missing(why):
    if REQUIRE:
        pytest.fail(f"{why} (TENSORFS_REQUIRE_S3=1: required here)", pytrace=False)
    pytest.skip(why)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} not listening on 127.0.0.1:{port} after {timeout:.0f}s")


def stop_proc(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def tls_cert(workdir):
    """A self-signed certificate for 127.0.0.1 (openssl CLI): returns (cert_path, key_path)."""
    openssl = shutil.which("openssl")
    if not openssl:
        missing("openssl (Debian package) is not installed")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return cert, key


class S3Server:
    """s3rver on 127.0.0.1:<free port> with its data in `root`; buckets made at start; over TLS
    with tls=(cert, key); honouring conditional PUTs with conditional=True."""

    def __init__(self, root, buckets=("lake",), tls=None, conditional=False):
        if not (os.path.isfile(S3RVER) and os.access(S3RVER, os.X_OK)) or \
                not S3RVER_MODULE.is_dir():
            missing(f"s3rver not installed under {S3RVER_MODULE.parent} (cd tests/s3 && npm ci)")
        if not shutil.which("node"):
            missing("node (Debian package nodejs) is not installed")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.root.parent / "s3rver.log"
        cmd = [S3RVER, "-d", str(self.root), "-a", "127.0.0.1", "-p", str(self.port),
               "--no-vhost-buckets"]
        for b in buckets:
            cmd += ["--configure-bucket", b]
        self.scheme = "https" if tls else "http"
        if tls:
            cmd += ["--cert", str(tls[0]), "--key", str(tls[1])]
        if conditional:  # honour If-None-Match / If-Match on PUT, as S3 does
            cmd.append("--conditional-writes")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        try:
            wait_port(self.port, self.proc, "s3rver")
        except RuntimeError as e:
            self.stop()
            pytest.fail(f"{e}; log:\n{self.log_path.read_text(errors='replace')[-4000:]}")

    @property
    def endpoint(self):
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def stop(self):
        stop_proc(self.proc)
        self._log.close()


def s3_env(monkeypatch, endpoint, **extra):
    """Point tensorfs (the CLI and mounts, which inherit os.environ) at endpoint."""
    for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "TENSORFS_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    for k, v in extra.items():
        monkeypatch.setenv(k, str(v))


class UrlLake(Lake):
    """A Lake whose CLI and mount URL is `url` (s3://..., http://...); scratch stays local."""

    def __init__(self, url, scratch, local_root=None):
        super().__init__(local_root or scratch, scratch)
        self._url = url.rstrip("/")

    @property
    def url(self):
        return self._url


class Nginx:
    """nginx serving directory `root` read-only on 127.0.0.1:<free port> (autoindex optional;
    limit_rate: each response sent at most that fast, in nginx's units: "20m" is 20 MB/s). Its
    access log (access_log()) gives each request's status, Range header and times."""

    def __init__(self, workdir, root, autoindex=False, tls=None, limit_rate=None):
        if not os.access(NGINX, os.X_OK):
            missing("nginx (Debian package) is not installed")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.scheme = "https" if tls else "http"
        conf = self.workdir / "nginx.conf"
        w = self.workdir
        conf.write_text(f"""
worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/error.log;
events {{ worker_connections 64; }}
http {{
    log_format timed '$status $msec $request_time $body_bytes_sent "$http_range" "$request"';
    access_log {w}/access.log timed;
    client_body_temp_path {w}/tmp_body;
    proxy_temp_path {w}/tmp_proxy;
    fastcgi_temp_path {w}/tmp_fastcgi;
    uwsgi_temp_path {w}/tmp_uwsgi;
    scgi_temp_path {w}/tmp_scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{self.port}{' ssl' if tls else ''};
        {f'ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};' if tls else ''}
        location /lake/ {{
            alias {root}/;
            autoindex {'on' if autoindex else 'off'};
            {f'limit_rate {limit_rate};' if limit_rate else ''}
            limit_except GET HEAD {{ deny all; }}
        }}
    }}
}}
""")
        self.proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(w), "-g",
                                      "daemon off; user root;" if os.getuid() == 0
                                      else "daemon off;"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(w / "stderr.log", "wb"),
                                     start_new_session=True, preexec_fn=_die_with_parent)
        try:
            wait_port(self.port, self.proc, "nginx")
        except RuntimeError as e:
            self.stop()
            pytest.fail(f"{e}; log:\n{(w / 'stderr.log').read_text(errors='replace')}"
                        f"{(w / 'error.log').read_text(errors='replace') if (w / 'error.log').exists() else ''}")

    @property
    def url(self):
        return f"{self.scheme}://127.0.0.1:{self.port}/lake"

    def access_log(self):
        """[(status, start s, end s, Range header or "", request line, body bytes sent)] of
        the requests answered so far (or ended by the client)."""
        out = []
        path = self.workdir / "access.log"
        for line in path.read_text().splitlines() if path.exists() else ():
            status, end, took, sent, rest = line.split(" ", 4)
            rng, req = rest[1:-1].split('" "', 1)
            out.append((int(status), float(end) - float(took), float(end),
                        "" if rng == "-" else rng, req, int(sent)))
        return out

    def stop(self):
        stop_proc(self.proc)
