# SPDX-License-Identifier: MIT
"""packaging/deps.sh lists every Debian package the build, the tests, the examples and the
benchmarks use. What they use is found, not listed by hand: the headers every C source includes
(cc -M), the commands the tests, benchmarks, scripts and the README run, and the Python modules
they import; each is traced to the package that owns it (dpkg -S), or, when it is not installed
here (`make test` installs the test group, not the benchmarks'), to the Debian package of its
name (python3-NAME for a module), which must exist and be listed. A package passes when the
list names it, when a listed package depends on it (transitively), or when Debian installs it
everywhere (Essential or Priority: required)."""

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT

DEPS = REPO_ROOT / "packaging" / "deps.sh"
# Names in the project's argument lists that are not commands from a package.
OURS = {"tensorfs", "mount.tensorfs", "sh", "bash"}
# Commands the README's examples run, besides those the tests and benchmarks run.
README_COMMANDS = {"getfattr", "fusermount3", "zstd", "mount", "dpkg", "apt", "tmux"}
# Commands the shell scripts (tests/demo.sh, packaging/*.sh, .ci/run) run.
SCRIPT_COMMANDS = {"dpkg-buildpackage", "dh", "fakeroot", "dpkg-query", "apt-get", "npm",
                   "make", "cc", "pkg-config", "mountpoint", "tar", "lintian", "man"}


def listed():
    p = subprocess.run([str(DEPS), "--list", "all"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    pkgs = p.stdout.split()
    assert pkgs and len(pkgs) == len(set(pkgs)), pkgs
    return set(pkgs)


@functools.lru_cache(maxsize=None)
def installed_db():
    """name -> (depends, essential); and virtual name -> providers."""
    p = subprocess.run(["dpkg-query", "-W", "-f",
                        "${Package}\t${db:Status-Status}\t${Essential}\t${Priority}\t"
                        "${Depends}, ${Pre-Depends}\t${Provides}\n"],
                       capture_output=True, text=True, check=True)
    db, provides = {}, {}
    for line in p.stdout.splitlines():
        name, status, essential, prio, deps, prov = (line.split("\t") + [""] * 6)[:6]
        if status != "installed":
            continue
        alts = [[a.split()[0].split(":")[0] for a in d.split("|") if a.strip()]
                for d in deps.split(",") if d.strip()]
        db[name] = (alts, essential == "yes" or prio == "required")
        for v in prov.split(","):
            if v.strip():
                provides.setdefault(v.split()[0], []).append(name)
    return db, provides


def closure(roots):
    db, provides = installed_db()
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        for real in [n] + provides.get(n, []):
            if real in seen or real not in db:
                continue
            seen.add(real)
            for alts in db[real][0]:
                todo.extend(alts)
    return seen | {n for n, (_, base) in db.items() if base}


def dpkg_search(paths):
    """dpkg -S over many paths at once: path -> package, for the paths dpkg knows."""
    found = {}
    paths = sorted(set(paths))
    for i in range(0, len(paths), 500):
        p = subprocess.run(["dpkg", "-S", *paths[i:i + 500]], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            pkgs, _, path = line.partition(": ")
            found[path.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    return found


def owners(paths):
    """path -> owning package (None when dpkg knows none)."""
    cands = {}
    for path in paths:
        cs = [path, os.path.realpath(path)]
        for c in list(cs):  # merged /usr: packages may have shipped it under /bin or /lib
            m = re.match(r"^/usr/(bin|sbin|lib|lib64)/(.*)", c)
            if m:
                cs.append(f"/{m.group(1)}/{m.group(2)}")
        cands[path] = cs
    found = dpkg_search(c for cs in cands.values() for c in cs)
    return {path: next((found[c] for c in cs if c in found), None)
            for path, cs in cands.items()}


def c_sources():
    dirs = ["core", "fs", "gpu", "mount", "packaging/client", "tests/unit", "tests/integration",
            "tests/fuzz"]
    return sorted(p for d in dirs for p in (REPO_ROOT / d).glob("*.c"))


def system_headers():
    pc = subprocess.run(["pkg-config", "--cflags", "fuse3", "libzstd", "libxxhash", "libcrypto",
                         "libcurl", "inih", "cmocka"], capture_output=True, text=True)
    assert pc.returncode == 0, "pkg-config cannot find a build dependency: " + pc.stderr
    flags = ["-D_GNU_SOURCE", "-Icore", "-Ifs", "-Igpu", "-Ipackaging/include", "-Itests/unit",
             *pc.stdout.split()]
    headers = set()
    for src in c_sources():
        p = subprocess.run(["cc", "-M", *flags, str(src.relative_to(REPO_ROOT))],
                           capture_output=True, text=True, cwd=REPO_ROOT)
        assert p.returncode == 0, f"cc -M {src}: {p.stderr}"
        for h in p.stdout.replace("\\\n", " ").split()[2:]:
            if h.startswith("/"):
                headers.add(h)
    return headers


def python_files():
    return sorted(p for p in list((REPO_ROOT / "tests").rglob("*.py"))
                  + list((REPO_ROOT / "packaging" / "python").rglob("*.py"))
                  if "node_modules" not in p.parts)


def imported_modules():
    local = {p.stem for p in python_files()} | {"tensorfs"}
    mods = set()
    for f in python_files():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods.add(node.module.split(".")[0])
    return {m for m in mods if m not in sys.stdlib_module_names and m not in local}


RUNNERS = {"run", "Popen", "check_output", "check_call", "call", "spawn", "run_client",
           "client_cmd"}


def commands():
    """Commands the Python code runs (the first word of a literal argument list handed to
    subprocess and the project's runners, or kept in a *cmd/argv variable), the ones it looks
    up with shutil.which, those the shell scripts run, and the README's."""
    names = set(README_COMMANDS) | SCRIPT_COMMANDS
    for f in python_files():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            lst = None
            if isinstance(node, ast.Call) and node.args:
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else \
                    getattr(node.func, "id", "")
                if fn == "which" and isinstance(node.args[0], ast.Constant):
                    names.add(node.args[0].value)
                elif fn in RUNNERS:
                    lst = node.args[0]
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and ("cmd" in t.id or "argv" in t.id)
                    for t in node.targets):
                lst = node.value
            if isinstance(lst, ast.List) and lst.elts and isinstance(lst.elts[0], ast.Constant) \
                    and isinstance(lst.elts[0].value, str):
                names.add(lst.elts[0].value)
    return {n for n in names if re.fullmatch(r"[a-z][\w.+-]*", n)}


def listed_by_name(pkgs, name):
    """For what is not installed here (dpkg cannot say whose it is): a Debian package of that
    name exists and the list has it."""
    if name not in pkgs:
        return False
    p = subprocess.run(["apt-cache", "show", "--no-all-versions", name], capture_output=True,
                       text=True)
    return p.returncode == 0 and f"Package: {name}" in p.stdout


def test_every_package_used_is_listed():
    if not shutil.which("dpkg-query"):
        pytest.skip("not a Debian system")
    pkgs = listed()
    ok = closure(pkgs)
    problems = []

    for path, pkg in owners(system_headers()).items():
        if pkg is None:
            if not path.startswith("/usr/local/cuda"):  # the CUDA toolkit is not from Debian
                problems.append(f"header {path}: no Debian package owns it")
        elif pkg not in ok:
            problems.append(f"header {path}: package {pkg} is not in deps.sh")

    for mod in sorted(imported_modules()):
        p = subprocess.run(["/usr/bin/python3", "-c",
                            f"import importlib.util as u; s = u.find_spec({mod!r}); "
                            f"print(s.origin if s else '')"], capture_output=True, text=True)
        origin = p.stdout.strip()
        if not origin:
            # Not installed here (a benchmark's, say): its Debian package must still be listed.
            if not listed_by_name(pkgs, f"python3-{mod.lower()}"):
                problems.append(f"python module {mod}: not importable by /usr/bin/python3, "
                                f"and python3-{mod.lower()} is not in deps.sh")
            continue
        pkg = owners([origin])[origin]
        if pkg is None or pkg not in ok:
            problems.append(f"python module {mod} ({origin}): package {pkg} is not in deps.sh")

    cmds = commands() - OURS
    assert {"fusermount3", "s3fs", "lintian", "zstd"} <= cmds, cmds
    for cmd in sorted(cmds):
        path = shutil.which(cmd) or shutil.which(cmd, path="/usr/sbin:/sbin")
        if path is None:
            if cmd in {"node", "npm"}:  # checked below
                continue
            if not listed_by_name(pkgs, cmd):
                problems.append(f"command {cmd}: not installed here, and no package of that "
                                f"name is in deps.sh")
            continue
        pkg = owners([path])[path]
        if pkg is None:
            if cmd in {"node", "npm"}:
                continue
            problems.append(f"command {cmd} ({path}): no Debian package owns it")
        elif pkg not in ok:
            problems.append(f"command {cmd} ({path}): package {pkg} is not in deps.sh")
    for cmd in ("node", "npm"):
        if not shutil.which(cmd):
            problems.append(f"command {cmd}: not installed (deps.sh installs nodejs and npm)")

    assert not problems, "\n".join(problems)


def test_listing_and_missing_modes(tmp_path):
    """--list needs nothing installed; --missing names what apt would install and installs
    nothing; an unknown group is a usage error."""
    build = subprocess.run([str(DEPS), "--list"], capture_output=True, text=True)
    assert build.returncode == 0
    assert {"libfuse3-dev", "pkg-config", "build-essential"} <= set(build.stdout.split())
    assert "lintian" not in build.stdout.split()  # test-only packages stay out of the build group
    test = set(subprocess.run([str(DEPS), "--list", "test"], capture_output=True,
                              text=True).stdout.split())
    assert {"lintian", "tmux", "python3-pytest"} <= test and set(build.stdout.split()) <= test
    p = subprocess.run([str(DEPS), "--missing", "all"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("deps.sh: "), p.stdout + p.stderr
    bad = subprocess.run([str(DEPS), "nosuchgroup"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown argument" in bad.stderr


def test_without_root_or_sudo_it_says_what_to_do(tmp_path):
    """Not root and no sudo on PATH: a clear message and a non-zero exit, when anything is
    missing (a made-up package stands in through a copy of the script)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    tmp_path = Path(tempfile.mkdtemp(prefix="tensorfs-deps-"))  # readable by nobody
    script = tmp_path / "deps.sh"
    text = DEPS.read_text()
    assert 'BUILD_PKGS="build-essential ' in text
    script.write_text(text.replace('BUILD_PKGS="build-essential ',
                                   'BUILD_PKGS="tensorfs-no-such-package build-essential ', 1))
    script.chmod(0o755)
    os.chmod(tmp_path, 0o755)
    bindir = tmp_path / "bin"  # dpkg-query and the shell's basics, but no sudo
    bindir.mkdir()
    for tool in ("dpkg-query", "id", "awk", "sed", "grep", "tr", "dirname", "cat", "sh"):
        (bindir / tool).symlink_to(shutil.which(tool))
    def nobody():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    p = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True,
                       env={"PATH": str(bindir), "HOME": "/"}, cwd="/", preexec_fn=nobody)
    shutil.rmtree(tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "tensorfs-no-such-package" in p.stderr and "no sudo" in p.stderr, p.stderr
