# SPDX-License-Identifier: MIT
"""Is a path a mount point? Read from /proc/self/mountinfo, so that a FUSE mount whose daemon
died (where stat fails with ENOTCONN and os.path.ismount says no) still counts. Shared by the
integration tests and the benchmarks (standard library only)."""

import os


def _unescape_mountinfo(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def is_mounted(path):
    """True when `path` is a mount point (by /proc/self/mountinfo: works for a dead daemon)."""
    path = os.path.realpath(str(path))
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and _unescape_mountinfo(fields[4]) == path:
                    return True
    except OSError:
        pass
    return False
