# SPDX-License-Identifier: MIT
"""core/sigv4 against an independent signer: Debian's python3-botocore (S3SigV4Auth).

The C signer runs as tests/unit/sigv4_cli (built by `make`, found through $TENSORFS_SIGV4_CLI or
next to $TENSORFS_BIN); for every request both must produce the same headers and the same
Authorization value, byte for byte."""

import datetime
import hashlib
import os
import subprocess
from pathlib import Path
from unittest import mock
from urllib.parse import quote

import pytest

from conftest import REPO_ROOT, TENSORFS_BIN
import s3help

try:
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
except ImportError:  # pragma: no cover - depends on the machine
    botocore = None

EPOCH = 1767225600 + 3 * 3600 + 25 * 60 + 7  # 2026-01-01 03:25:07 UTC


def sigv4_cli():
    cands = [os.environ.get("TENSORFS_SIGV4_CLI"),
             str(Path(TENSORFS_BIN).resolve().parent / "tests" / "sigv4_cli"),
             str(REPO_ROOT / "build" / "rel" / "tests" / "sigv4_cli")]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    pytest.fail(f"sigv4_cli not built (tried {cands}); run `make build/rel/tests/sigv4_cli`",
                pytrace=False)


@pytest.fixture
def boto():
    if botocore is None:
        s3help.missing("python3-botocore (Debian package) is not installed")
    return botocore


def c_sign(method, url, payload_hash, region, extra, creds):
    env = dict(os.environ)
    env.pop("AWS_SESSION_TOKEN", None)
    env.update({"AWS_ACCESS_KEY_ID": creds[0], "AWS_SECRET_ACCESS_KEY": creds[1]})
    if creds[2]:
        env["AWS_SESSION_TOKEN"] = creds[2]
    args = [sigv4_cli(), method, url, payload_hash, str(EPOCH), region]
    args += [f"{k}:{v}" for k, v in extra.items()]
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(": ")
        out[k.lower()] = v
    return out


def boto_sign(method, url, params, body, region, extra, creds):
    cred = botocore.credentials.Credentials(*creds)
    req = botocore.awsrequest.AWSRequest(method=method, url=url, params=params or {},
                                         data=body, headers=dict(extra))
    fake = mock.MagicMock()
    fake.datetime.utcnow.return_value = datetime.datetime.utcfromtimestamp(EPOCH)
    with mock.patch.object(botocore.auth, "datetime", fake):
        botocore.auth.S3SigV4Auth(cred, "s3", region).add_auth(req)
    return {k.lower(): v for k, v in req.headers.items()}


def enc_key(key):
    return quote(key, safe="/~")


def enc_query(params):
    return "&".join(f"{quote(k, safe='-_.~')}={quote(str(v), safe='-_.~')}"
                    for k, v in params.items())


CREDS = [("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None),
         ("ASIAEXAMPLETEMP", "c2VjcmV0IHdpdGggc2xhc2hlcy8rPQ==/x+y", "FwoGZXIvYXdzEBYaD+tok/en==")]

CASES = [
    # method, host, key, params, body, region, extra headers
    ("GET", "examplebucket.s3.amazonaws.com", "/test.txt", None, b"", "us-east-1",
     {"Range": "bytes=0-9"}),
    ("HEAD", "127.0.0.1:9000", "/bucket/lake/ds/tensorfs-dataset", None, b"", "us-east-1", {}),
    ("GET", "127.0.0.1:9000", "/bucket", {"list-type": "2", "prefix": "lake/ds/refs/heads/",
                                           "delimiter": "/"}, b"", "eu-west-3", {}),
    ("GET", "127.0.0.1:9000", "/bucket",
     {"list-type": "2", "continuation-token": "1/abc+def==", "prefix": "a b/ሴ/"}, b"",
     "us-west-2", {}),
    ("PUT", "bucket.s3.eu-central-1.amazonaws.com", "/lake/ds/objects/ab/" + "c" * 62, None,
     b"\x00\x01chunk bytes" * 100, "eu-central-1", {"If-None-Match": "*"}),
    ("PUT", "127.0.0.1:9000", "/bucket/lake/ds/refs/heads/main", None, b"a" * 64 + b"\n",
     "us-east-1", {"If-Match": '"0123456789abcdef0123456789abcdef"'}),
    ("PUT", "127.0.0.1:9000", "/bucket/odd key/$weird=+&name (1).bin", None, b"x",
     "us-east-1", {"Content-Type": "application/octet-stream"}),
    ("POST", "127.0.0.1:9000", "/bucket/big", {"uploads": ""}, b"", "us-east-1", {}),
    ("PUT", "127.0.0.1:9000", "/bucket/big", {"partNumber": "3", "uploadId": "Xy/z+w=="},
     b"p" * 1000, "us-east-1", {}),
    ("DELETE", "127.0.0.1:9000", "/bucket/lake/ds/objects/00/" + "1" * 62, None, b"",
     "ap-southeast-2", {}),
]


@pytest.mark.parametrize("creds", CREDS, ids=["keys", "session-token"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_same_signature_as_botocore(boto, case, creds):
    method, host, key, params, body, region, extra = case
    payload = hashlib.sha256(body).hexdigest()
    url = f"http://{host}{enc_key(key)}"
    c_url = url + ("?" + enc_query(params) if params else "")
    theirs = boto_sign(method, url, params, body, region, extra, creds)
    ours = c_sign(method, c_url, payload, region, extra, creds)
    assert ours["authorization"] == theirs["authorization"]
    for h in ("x-amz-date", "x-amz-content-sha256", "x-amz-security-token"):
        assert ours.get(h) == theirs.get(h), h


def test_unsigned_payload_matches(boto):
    """GET with UNSIGNED-PAYLOAD (allowed by S3 for any request)."""
    creds = CREDS[0]
    url = "https://bucket.s3.amazonaws.com/lake/ds/objects/aa/" + "b" * 62
    cred = botocore.credentials.Credentials(*creds)
    req = botocore.awsrequest.AWSRequest(method="GET", url=url)
    fake = mock.MagicMock()
    fake.datetime.utcnow.return_value = datetime.datetime.utcfromtimestamp(EPOCH)
    req.context["client_config"] = mock.Mock(s3={"payload_signing_enabled": False})
    with mock.patch.object(botocore.auth, "datetime", fake):
        botocore.auth.S3SigV4Auth(cred, "s3", "us-east-1").add_auth(req)
    ours = c_sign("GET", url, "UNSIGNED-PAYLOAD", "us-east-1", {}, creds)
    assert req.headers["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    assert ours["authorization"] == req.headers["Authorization"]
