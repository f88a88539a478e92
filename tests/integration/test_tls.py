# SPDX-License-Identifier: MIT
"""https:// and s3:// over TLS against real servers on loopback (nginx, s3rver) with a private
CA: the certificate is verified against the bundle named by $AWS_CA_BUNDLE,
$TENSORFS_HTTP_CA_FILE or the [http] ca_file setting, and refused without it."""

import os

import numpy as np
import pytest

from conftest import check_column_file, tfs
from s3help import Nginx, S3Server, UrlLake, s3_env, tls_cert


@pytest.fixture
def cert(tmp_path):
    return tls_cert(tmp_path / "tls")


@pytest.fixture
def no_ca_env(monkeypatch):
    for k in ("AWS_CA_BUNDLE", "TENSORFS_HTTP_CA_FILE", "TENSORFS_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    # The tests' own HOME: no user configuration file decides the outcome.
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")


def test_https_lake_verified_against_ca_bundle(lake, tmp_path, mount, cert, no_ca_env,
                                               monkeypatch):
    rng = np.random.default_rng(21)
    cols = {"x": rng.standard_normal((20_000, 4)).astype(np.float32)}
    lake.build("ds", cols, "--chunk-size", "64k")
    rc, _, err = tfs("index", lake.url)
    assert rc == 0, err
    web = Nginx(tmp_path / "nginx", lake.root, tls=cert)
    try:
        hl = UrlLake(web.url, tmp_path / "npy")
        assert hl.url.startswith("https://")
        # Unknown issuer: refused at once (not retried), with the TLS library's reason.
        rc, out, err = tfs("ls", hl.url)
        assert rc != 0 and "self-signed certificate after 1 attempt" in err, err
        # A missing bundle is a configuration error, named.
        monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "missing.pem"))
        rc, out, err = tfs("ls", hl.url)
        assert rc != 0 and "ca_file" in err and "missing.pem" in err, err
        # The bundle from the environment...
        monkeypatch.setenv("AWS_CA_BUNDLE", str(cert[0]))
        rc, out, err = tfs("ls", hl.url)
        assert rc == 0 and out.split() == ["ds"], err
        m = mount(hl)
        check_column_file(m / "ds" / "main" / "x.npy", cols["x"])
        m.stop()
        # ... or from the configuration file.
        monkeypatch.delenv("AWS_CA_BUNDLE")
        conf = tmp_path / "tensorfs.ini"
        conf.write_text(f"[http]\nca_file = {cert[0]}\n")
        os.chmod(conf, 0o600)
        rc, out, err = tfs("--config", str(conf), "ls", hl.url)
        assert rc == 0 and out.split() == ["ds"], err
    finally:
        web.stop()


def test_s3_over_tls(tmp_path, mount, cert, no_ca_env, monkeypatch):
    srv = S3Server(tmp_path / "s3data", tls=cert)
    try:
        s3_env(monkeypatch, srv.endpoint)
        assert srv.endpoint.startswith("https://")
        lk = UrlLake("s3://lake/tls", tmp_path / "npy")
        rc, out, err = tfs("create", lk.ds_url("ds"))
        assert rc != 0 and "certificate" in err.lower(), err
        monkeypatch.setenv("TENSORFS_HTTP_CA_FILE", str(cert[0]))
        rng = np.random.default_rng(22)
        cols = {"y": rng.integers(0, 1 << 30, size=(30_000, 3)).astype(np.int64)}
        lk.create("ds")
        lk.import_("ds", cols, "--chunk-size", "128k")
        m = mount(lk)
        check_column_file(m / "ds" / "main" / "y.npy", cols["y"])
    finally:
        srv.stop()
