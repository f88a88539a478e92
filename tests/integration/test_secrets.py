# SPDX-License-Identifier: MIT
"""A planted secret (a remote's secret key and session token, in a config file) appears in no
log line, error message, stats, metrics or errors file, and no process title: while requests
succeed, and while they fail because the server rejects those very credentials."""

import os

import numpy as np

from conftest import run_proc
import s3help
from s3help import S3Server, UrlLake

SECRET = "PLANTEDsecretKEY7f3a9c41"
TOKEN = "PLANTEDsessionTOKEN0b2e"


def config(tmp_path, endpoint, key_id):
    cfg = tmp_path / f"cfg-{key_id}.ini"
    cfg.write_text(f"""[remote "r"]
endpoint = {endpoint}
region = us-east-1
path_style = true
access_key = {key_id}
secret_key = {SECRET}
session_token = {TOKEN}
""")
    os.chmod(cfg, 0o600)
    return cfg


def assert_clean(text, where):
    for s in (SECRET, TOKEN):
        assert s not in text, f"{where} holds a planted secret"


def test_planted_secret_is_nowhere(tmp_path, mount, monkeypatch):
    """Signed with the planted secret: s3rver checks the key id, not the signature, so with its
    own key id the requests succeed, and with an unknown one they fail (403)."""
    srv = S3Server(tmp_path / "s3data", buckets=("lake",))
    try:
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                  "AWS_ENDPOINT_URL", "TENSORFS_CONFIG"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("TENSORFS_LOG", "debug")  # every request and retry logged
        # A lake the right credentials wrote (s3rver takes only its own).
        good = tmp_path / "good.ini"
        good.write_text(f'[remote "r"]\nendpoint = {srv.endpoint}\nregion = us-east-1\n'
                        f"path_style = true\naccess_key = {s3help.ACCESS_KEY}\n"
                        f"secret_key = {s3help.SECRET_KEY}\n")
        os.chmod(good, 0o600)
        monkeypatch.setenv("TENSORFS_CONFIG", str(good))
        lk = UrlLake("s3://r@lake/l", tmp_path / "npy")
        lk.create("d")
        lk.import_("d", {"x": np.arange(5000, dtype=np.int64)})
        texts = []
        # Requests signed with the planted secret that succeed.
        ok = config(tmp_path, srv.endpoint, s3help.ACCESS_KEY)
        monkeypatch.setenv("TENSORFS_CONFIG", str(ok))
        p = run_proc(["info", "s3://r@lake/l/d"], check=True)
        texts.append(("info", p.stdout + p.stderr))
        m = mount(lk, opts=(f"config={ok}",), name="mnt_ok")
        assert (np.load(m / "d" / "main" / "x.npy") == np.arange(5000)).all()
        for f in ("stats", "metrics", "errors"):
            texts.append((f".tensorfs/{f}", (m / ".tensorfs" / f).read_text()))
        m.stop()
        texts.append(("the daemon's log", m.log()))
        # And refused ones: the error paths.
        bad = config(tmp_path, srv.endpoint, "AKIDUNKNOWN")
        monkeypatch.setenv("TENSORFS_CONFIG", str(bad))
        for args in (["ls", "s3://r@lake/l"], ["info", "s3://r@lake/l/d"],
                     ["create", "s3://r@lake/l/e"], ["verify", "s3://r@lake/l/d"],
                     ["import", "s3://r@lake/l/d", f"x={tmp_path / 'npy'}"]):
            p = run_proc(args)
            assert p.returncode != 0, args
            texts.append((" ".join(args), p.stdout + p.stderr))
        m = mount(lk, opts=(f"config={bad}",), name="mnt")
        ps = open(f"/proc/{m.pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        texts.append(("the daemon's command line", ps))
        try:
            os.listdir(m / "d" / "main")
        except OSError:
            pass  # refused by the server: an error, which must not carry the secret either
        for f in ("stats", "metrics", "errors", "bad_rows"):
            texts.append((f".tensorfs/{f}", (m / ".tensorfs" / f).read_text()))
        texts.append(("the daemon's log", m.log()))
        for where, text in texts:
            assert_clean(text, where)
        assert "403" in m.log() or "denied" in m.log().lower() or "Forbidden" in m.log(), \
            m.log()[-2000:]
    finally:
        srv.stop()
