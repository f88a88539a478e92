# SPDX-License-Identifier: MIT
"""The Debian package and the man pages: `make deb` builds tensorfs_VERSION_ARCH.deb; lintian finds
no error in it; `dpkg -i` into a throw-away root installs exactly the files it is meant to hold;
the installed tensorfs, Python client, headers and pkg-config file work from there; every man
page renders without a warning.

Where dpkg-buildpackage, debhelper or lintian is missing the test skips with the reason, and
fails instead under TENSORFS_REQUIRE_TOOLS=1 (`make test` and CI, which install them first)."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, SLOW

REQUIRE = os.environ.get("TENSORFS_REQUIRE_TOOLS") == "1"
VERSION = (REPO_ROOT / "VERSION").read_text().strip()


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        why = f"needs {', '.join(missing)} (packaging/deps.sh test installs them)"
        if REQUIRE:
            pytest.fail(why + "; TENSORFS_REQUIRE_TOOLS=1: required here", pytrace=False)
        pytest.skip(why)


def arch():
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def multiarch():
    return subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                          text=True, check=True).stdout.strip()


def man_warnings(path):
    p = subprocess.run(["man", "--warnings", "-l", str(path)], capture_output=True, text=True,
                       env={**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8"})
    assert p.returncode == 0, p.stderr
    return p.stderr.strip(), p.stdout


@pytest.fixture(scope="module")
def deb():
    need("dpkg-buildpackage", "dh", "fakeroot", "dpkg-shlibdeps")
    p = subprocess.run([str(REPO_ROOT / "packaging" / "mkdeb.sh")], capture_output=True,
                       text=True, timeout=900 * SLOW)
    assert p.returncode == 0, f"make deb failed:\n{p.stdout}\n{p.stderr}"
    path = REPO_ROOT / f"tensorfs_{VERSION}_{arch()}.deb"
    assert path.is_file(), f"{path.name} not built: {p.stdout}"
    return path


@pytest.fixture(scope="module")
def installed(deb, tmp_path_factory):
    """The package installed with dpkg into an empty root; returns that root."""
    root = tmp_path_factory.mktemp("dpkgroot")
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
        (root / d).mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("")
    # Its dependencies live on this machine, not in the empty root's database.
    p = subprocess.run(["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless",
                        "--log=/dev/null", "-i", str(deb)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return root


def test_lintian_reports_no_errors(deb):
    need("lintian")
    p = subprocess.run(["lintian", "--no-tag-display-limit", str(deb)], capture_output=True,
                       text=True, timeout=300 * SLOW)
    tags = [ln for ln in p.stdout.splitlines() if re.match(r"^[EWIXP]: ", ln)]
    errors = [ln for ln in tags if ln.startswith("E: ")]
    print("lintian:\n" + "\n".join(tags))
    assert not errors, "lintian errors:\n" + "\n".join(errors)
    assert p.returncode == 0, p.stdout + p.stderr


def test_depends_are_computed(deb):
    control = (REPO_ROOT / "packaging" / "debian" / "control.in").read_text()
    depends = re.search(r"^Package: tensorfs$.*?^Depends: ([^\n]*)$", control, re.M | re.S).group(1)
    assert "${shlibs:Depends}" in depends
    assert not re.search(r"\blib", depends), "library dependencies written by hand: " + depends
    got = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                         text=True, check=True).stdout
    for lib in ("libfuse3-3", "libzstd1", "libcurl4", "libc6"):
        assert lib in got, f"{lib} missing from the computed Depends: {got}"
    # FFmpeg's libraries are opened on first use, not linked: recommended, found from the
    # sonames the binary opens, never written by hand.
    assert not re.search(r"\blib", control.split("Recommends:")[1].split("\n")[0])
    assert not re.search(r"libav|libsw", got), got
    rec = subprocess.run(["dpkg-deb", "-f", str(deb), "Recommends"], capture_output=True,
                         text=True, check=True).stdout
    for lib in ("libavformat", "libavcodec", "libavutil", "libswscale", "libswresample"):
        assert re.search(rf"\b{lib}\d+\b", rec), f"{lib} missing from the Recommends: {rec}"
    assert subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True,
                          text=True).stdout.strip() == VERSION


def test_installs_what_it_is_meant_to_hold(installed):
    ma = multiarch()
    p = subprocess.run(["dpkg", f"--root={installed}", "-L", "tensorfs"], capture_output=True,
                       text=True, check=True)
    files = {f for f in p.stdout.splitlines()
             if f and not (installed / f.lstrip("/")).is_dir()}
    expected = {
        "/usr/bin/tensorfs",
        "/sbin/mount.tensorfs",
        "/usr/share/man/man1/tensorfs.1.gz",
        "/usr/share/man/man8/mount.tensorfs.8.gz",
        "/usr/share/man/man5/tensorfs.ini.5.gz",
        "/etc/tensorfs/tensorfs.ini.example",
        "/usr/include/tensorfs/client.h",
        "/usr/include/tensorfs/control.h",
        f"/usr/lib/{ma}/libtensorfs-client.a",
        f"/usr/lib/{ma}/pkgconfig/tensorfs-client.pc",
        "/usr/lib/python3/dist-packages/tensorfs/__init__.py",
        "/usr/lib/python3/dist-packages/tensorfs/_version.py",
        "/usr/lib/python3/dist-packages/tensorfs/dask_ingest.py",
        "/usr/lib/python3/dist-packages/tensorfs/staging.py",
        "/usr/lib/python3/dist-packages/tensorfs/torch.py",
        "/usr/share/doc/tensorfs/changelog.gz",
        "/usr/share/doc/tensorfs/copyright",
        "/usr/share/doc/tensorfs/examples/fstab",
        "/usr/share/doc/tensorfs/examples/mnt-lake.mount",
    }
    assert files == expected, (f"missing: {sorted(expected - files)}\n"
                               f"unexpected: {sorted(files - expected)}")
    assert os.readlink(installed / "sbin/mount.tensorfs") == "/usr/bin/tensorfs"


def test_installed_programs_run(installed):
    p = subprocess.run([str(installed / "usr/bin/tensorfs"), "--version"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and p.stdout.startswith(f"tensorfs {VERSION} "), p.stdout + p.stderr
    py = subprocess.run(["/usr/bin/python3", "-c",
                         "import tensorfs, sys; print(tensorfs.__version__, tensorfs.__file__)"],
                        capture_output=True, text=True, cwd="/",
                        env={**os.environ, "PYTHONPATH": str(
                            installed / "usr/lib/python3/dist-packages")})
    assert py.returncode == 0, py.stderr
    version, where = py.stdout.split()
    assert version == VERSION and where.startswith(str(installed))


def test_client_library_builds_through_pkg_config(installed, tmp_path):
    need("cc", "pkg-config")
    env = {**os.environ, "PKG_CONFIG_SYSROOT_DIR": str(installed),
           "PKG_CONFIG_LIBDIR": str(installed / "usr/lib" / multiarch() / "pkgconfig")}
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "tensorfs-client"],
                           capture_output=True, text=True, env=env)
    assert flags.returncode == 0, flags.stderr
    assert subprocess.run(["pkg-config", "--modversion", "tensorfs-client"], capture_output=True,
                          text=True, env=env).stdout.strip() == VERSION
    src = tmp_path / "client.c"
    src.write_text('#include <tensorfs/client.h>\n#include <stdio.h>\n'
                   'int main(void) { int fd = tfs_client_connect("/nonexistent");\n'
                   '  printf("%d\\n", fd < 0); return 0; }\n')
    exe = tmp_path / "client"
    cc = subprocess.run(["cc", "-Wall", "-Werror", "-o", str(exe), str(src),
                         *flags.stdout.split()], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.strip() == "1"


def test_installed_man_pages_render_without_warnings(installed):
    need("man")
    pages = sorted((installed / "usr/share/man").rglob("*.gz"))
    assert len(pages) == 3
    for page in pages:
        warnings, text = man_warnings(page)
        assert not warnings, f"{page.name}: {warnings}"
        assert VERSION in text


def test_man_pages_in_the_tree_render_without_warnings():
    need("man")
    pages = sorted((REPO_ROOT / "packaging" / "man").iterdir())
    assert {p.name for p in pages} >= {"tensorfs.1", "mount.tensorfs.8", "tensorfs.ini.5"}
    for page in pages:
        warnings, text = man_warnings(page)
        assert not warnings, f"{page.name}: {warnings}"
        assert "NAME" in text


def test_mount_man_page_lists_every_mount_option():
    """Every -o option the mount command parses has its entry, with its default."""
    main_c = (REPO_ROOT / "mount" / "mount_cmd.c").read_text()
    parsed = set(re.findall(r'!strcmp\(o, "([a-z_]+)"\)', main_c))
    assert {"cache_mem", "ref_ttl", "nonempty"} <= parsed, parsed
    page = (REPO_ROOT / "packaging" / "man" / "mount.tensorfs.8").read_text()
    for opt in parsed:
        assert re.search(rf"^\.(B|BI) {opt}\b", page, re.M), f"-o {opt} is not in the man page"


def test_ini_man_page_lists_every_config_key():
    config_c = (REPO_ROOT / "core" / "config.c").read_text()
    keys = set()
    for table in re.findall(r"_keys\[\] = \{(.*?)\};", config_c, re.S):
        keys |= set(re.findall(r'"([a-z_]+)"', table))
    assert {"endpoint", "secret_key", "timeout_ms", "ca_file"} <= keys, keys
    page = (REPO_ROOT / "packaging" / "man" / "tensorfs.ini.5").read_text()
    for key in keys:
        assert re.search(rf"^\.(B|BI|BR) {key}\b", page, re.M), f"{key} is not in tensorfs.ini(5)"

