# SPDX-License-Identifier: MIT
"""A short soak (tests/soak/soak.py): concurrent readers of every kind against an s3:// lake
behind the fault-injecting proxy, cache pressure and a remount; any wrong byte, crash, leaked
staging file or RSS over budget fails. `make soak SECONDS=N` runs it longer."""

import os
import subprocess
import sys

from conftest import REPO_ROOT, SANITIZE, TENSORFS_BIN
import s3help


def test_short_soak(tmp_path):
    if not os.path.isfile(s3help.S3RVER) or not s3help.S3RVER_MODULE.is_dir():
        s3help.missing("s3rver not installed (cd tests/s3 && npm ci)")
    seconds = "40" if SANITIZE else "15"
    # AddressSanitizer keeps freed memory in a quarantine of up to 256 MB before reusing it.
    allowance = "512" if SANITIZE else "256"
    p = subprocess.run([sys.executable, str(REPO_ROOT / "tests/soak/soak.py"), "--seconds",
                        seconds, "--readers", "6", "--workdir", str(tmp_path),
                        "--rss-allowance-mb", allowance],
                       env=dict(os.environ, TENSORFS_BIN=TENSORFS_BIN), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert " 0 mismatches" in p.stdout and "MB verified" in p.stdout, p.stdout
