#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench.py's data (an image-like uint8 column, imported into a lake) and its cases: each
measures tensorfs and its baselines in the same run and adds rows to the results table. The
image cases (8 and 9) are in benchimages.py."""

import contextlib
import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchkit import (BenchError, COLUMN, CpuMeter, DATASET, DiskMeter, folio_census, log, MB,
                      med, MiB, proc_status, random_mmap, random_pread, RssSampler, scan_mmap,
                      scan_read, warm_files, zstd_decompress, zstd_frames)  # noqa: E402
from benchimages import case8, case9  # noqa: E402

GEN_VERSION = 1  # bump when the data generator changes (invalidates reused work dirs)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def gen_rows(rng, n, shape):
    """n image-like uint8 rows of `shape` (H, W, C): a smooth background (flat along each image
    row) with a textured band (2-D gradient + 4 bits of noise) over 1/8..5/8 of the height.
    zstd (level 1-3) compresses it about 2.5x, roughly like real image tensors with backgrounds."""
    H, W, C = shape
    r = np.arange(H, dtype=np.int16)[None, :, None, None]
    cidx = np.arange(W, dtype=np.int16)[None, None, :, None]
    c = rng.integers(0, 256, size=(n, 1, 1, C)).astype(np.int16)
    gy = rng.integers(-3, 4, size=(n, 1, 1, C)).astype(np.int16)
    gx = rng.integers(-3, 4, size=(n, 1, 1, C)).astype(np.int16)
    img = np.broadcast_to((c + gy * r).astype(np.uint8), (n, H, W, C)).copy()
    h = rng.integers(max(1, H // 8), 5 * H // 8 + 1, size=n)
    top = rng.integers(0, H - h + 1)
    rows = np.arange(H)[None, :]
    band = (rows >= top[:, None]) & (rows < (top + h)[:, None])
    tex = (c + gy * r + gx * cidx).astype(np.uint8)
    tex += rng.integers(0, 16, size=(n, H, W, C), dtype=np.uint8)
    img[band] = tex[band]
    return img


def build_data(ctx):
    """Local .npy + lake dataset + extracted .zst chunk payloads (reused when meta matches)."""
    a = ctx.args
    shape = tuple(a.row_shape)
    row_bytes = int(np.prod(shape))
    rows = max(1, int(a.size_mb * MiB) // row_bytes)
    meta = {"gen": GEN_VERSION, "rows": rows, "row_shape": list(shape), "seed": a.seed,
            "chunk_size": a.chunk_size, "codec": a.codec, "level": a.level,
            "frame_size": a.frame_size, "bin_sha256": ctx.env.get("bin_sha256")}
    meta_path = ctx.work / "meta.json"
    if meta_path.exists() and ctx.npy.exists() and (ctx.lake / DATASET).is_dir():
        try:
            old = json.loads(meta_path.read_text())
        except ValueError:
            old = {}
        if {k: old.get(k) for k in meta if k != "bin_sha256"} == \
                {k: v for k, v in meta.items() if k != "bin_sha256"}:
            log(f"reusing the data in {ctx.work}")
            ctx.data = old["data"]
            return
    for p in (ctx.lake, ctx.zst_dir):
        shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        ctx.npy.unlink()

    total = rows * row_bytes
    log(f"generating {rows} rows of {shape} uint8 ({total / MiB:.0f} MiB) -> {ctx.npy}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    out = np.lib.format.open_memmap(ctx.npy, mode="w+", dtype=np.uint8, shape=(rows,) + shape)
    step = max(1, (16 * MiB) // row_bytes)
    for i in range(0, rows, step):
        j = min(rows, i + step)
        out[i:j] = gen_rows(rng, j - i, shape)
    out.flush()
    del out
    with open(ctx.npy, "rb") as f:
        os.fsync(f.fileno())
    t_gen = time.perf_counter() - t0

    log("importing into the lake")
    run_cli(ctx, ["create", f"{ctx.lake_url}/{DATASET}"])
    imp = ["import", f"{ctx.lake_url}/{DATASET}", f"{COLUMN}={ctx.npy}", "-m", "bench data",
           "--chunk-size", a.chunk_size, "--codec", a.codec]
    if a.level is not None:
        imp += ["--level", str(a.level)]
    if a.frame_size is not None:
        imp += ["--frame-size", a.frame_size]
    t0 = time.perf_counter()
    run_cli(ctx, imp, timeout=3600)
    t_import = time.perf_counter() - t0
    os.sync()

    # The chunk objects' payloads, as .zst files, for the decompression-limit baseline.
    ctx.zst_dir.mkdir(parents=True, exist_ok=True)
    n_zstd = n_raw = 0
    stored = raw_zstd = raw_total = 0
    for d in sorted((ctx.lake / DATASET / "objects").iterdir()):
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.name.startswith("."):
                continue
            blob = f.read_bytes()
            if len(blob) < 48 or blob[:4] != b"TFSO" or blob[6] != 1:
                continue
            if blob[7] == 2:  # framed: the zstd frames back to back (zstd -d takes that)
                framed = zstd_frames(blob)
                stored += len(blob) - 48
                raw_total += struct.unpack_from("<Q", blob, 16)[0]
                if not framed[1]:  # every frame kept as it is (a raw column's chunk)
                    n_raw += 1
                    continue
                n_zstd += 1
                raw_zstd += framed[1]
                (ctx.zst_dir / f"{d.name}{f.name[:14]}.zst").write_bytes(framed[0])
                continue
            codec = blob[7]
            raw_size = struct.unpack_from("<Q", blob, 16)[0]
            psize = struct.unpack_from("<Q", blob, 24)[0]
            hsize = struct.unpack_from("<I", blob, 8)[0] or 48
            stored += psize
            raw_total += raw_size
            if codec == 1:
                n_zstd += 1
                raw_zstd += raw_size
                (ctx.zst_dir / f"{d.name}{f.name[:14]}.zst").write_bytes(blob[hsize:hsize + psize])
            else:
                n_raw += 1
    os.sync()
    info = {}
    with contextlib.suppress(Exception):
        p = run_cli(ctx, ["info", f"{ctx.lake_url}/{DATASET}", "--json"])
        info = json.loads(p.stdout)
    ctx.data = {
        "rows": rows, "row_shape": list(shape), "dtype": "uint8", "row_bytes": row_bytes,
        "data_bytes": total, "data_mib": total / MiB, "chunk_objects": n_zstd + n_raw,
        "chunks_zstd": n_zstd, "chunks_raw": n_raw, "stored_bytes": stored,
        "raw_bytes_in_chunks": raw_total, "raw_bytes_zstd_chunks": raw_zstd,
        "compression_ratio": (raw_total / stored) if stored else None,
        "generate_s": t_gen, "import_s": t_import,
        "import_MBps": total / MB / t_import if t_import else None,
        "chunk_size": a.chunk_size, "codec": a.codec, "level": a.level,
        "schema": info,
    }
    meta["data"] = ctx.data
    meta_path.write_text(json.dumps(meta, indent=1))
    log(f"data: {total / MiB:.0f} MiB in {n_zstd + n_raw} chunks ({n_zstd} zstd, {n_raw} raw), "
        f"stored {stored / MiB:.0f} MiB (ratio {ctx.data['compression_ratio'] or 0:.2f}x); "
        f"import {t_import:.1f}s")
    if raw_total != total:
        raise BenchError(f"the chunk objects hold {raw_total} raw bytes, expected {total} "
                         f"(is the dataset a single column?)")


def run_cli(ctx, args, timeout=600):
    cmd = [ctx.bin] + [str(a) for a in args]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=timeout)
    if p.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` failed with status {p.returncode}:\n"
                         f"{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return p


def spot_check(ctx, m):
    """A few rows read through the mount equal the local file (not timed)."""
    rows = ctx.data["rows"]
    local = np.load(ctx.npy, mmap_mode="r")
    mnt = np.load(m.file(), mmap_mode="r")
    try:
        if mnt.shape != local.shape or mnt.dtype != local.dtype:
            raise BenchError(f"mounted shape/dtype {mnt.shape} {mnt.dtype} != local "
                             f"{local.shape} {local.dtype}")
        rng = np.random.default_rng(ctx.args.seed + 99)
        idx = sorted(set(rng.integers(0, rows, 64).tolist()) | {0, rows - 1})
        for i in idx:
            if not np.array_equal(np.array(mnt[i]), np.array(local[i])):
                raise BenchError(f"DATA MISMATCH: row {i} read through the mount differs from "
                                 f"the local .npy")
    finally:
        del local, mnt


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

def case1(ctx, res):
    """Cold sequential scan: mount (read, mmap) vs zstd -d limit vs local .npy cold."""
    a = ctx.args
    data_bytes = ctx.data["data_bytes"]
    zst = sorted(ctx.zst_dir.glob("*.zst"))
    raw_zstd = ctx.data["raw_bytes_zstd_chunks"]
    jobs = a.jobs

    lim = lim1 = limcold = None
    if zst:
        warm_files(zst)
        t = [zstd_decompress(zst, jobs) for _ in range(a.reps)]
        lim = raw_zstd / MB / med(t)
        t1 = [zstd_decompress(zst, 1) for _ in range(a.reps)]
        lim1 = raw_zstd / MB / med(t1)
        tc = []
        for _ in range(a.cold_reps):
            ctx.cache.drop()
            tc.append(zstd_decompress(zst, jobs))
        limcold = raw_zstd / MB / med(tc)
        res["zstd"] = {"files": len(zst), "raw_bytes": raw_zstd, "jobs": jobs,
                       f"warm_{jobs}proc_s": t, "warm_1proc_s": t1, f"cold_{jobs}proc_s": tc,
                       f"limit_{jobs}proc_MBps": lim, "limit_1proc_MBps": lim1,
                       f"cold_input_{jobs}proc_MBps": limcold}
        log(f"  zstd -d: {lim:,.0f} MB/s on {jobs} procs, {lim1:,.0f} MB/s on 1, "
            f"{limcold:,.0f} MB/s on {jobs} procs with cold input")
    else:
        res["zstd"] = {"note": "no zstd chunks (codec raw, or compression did not pay)"}
        log("  no zstd-compressed chunks: decompression baseline n/a")

    runs = {}
    for method in ("read", "mmap"):
        for where in ("mount", "local"):
            ts, stats, cpu = [], [], []
            for _ in range(a.cold_reps):
                if where == "mount":
                    with ctx.mount() as m:
                        path = m.file()
                        os.stat(path)
                        ctx.cache.drop()
                        with CpuMeter(m.pid) as c:
                            n, dt = (scan_read(path, a.read_size) if method == "read"
                                     else scan_mmap(path, a.mmap_block))
                        cpu.append(c)
                        stats.append(m.stats())
                else:
                    ctx.cache.drop()
                    n, dt = (scan_read(ctx.npy, a.read_size) if method == "read"
                             else scan_mmap(ctx.npy, a.mmap_block))
                ts.append(dt)
            nbytes = data_bytes if method == "mmap" else n
            runs[(method, where)] = nbytes / MB / med(ts)
            res[f"cold_{method}_{where}"] = {"bytes": nbytes, "seconds": ts,
                                             "MBps": runs[(method, where)]}
            if where == "mount":
                res[f"cold_{method}_{where}"]["daemon_stats"] = stats
                res[f"cold_{method}_{where}"]["cpu"] = [c.as_dict() for c in cpu]
            log(f"  cold {method:4s} {where:5s}: {runs[(method, where)]:,.0f} MB/s "
                f"(runs {', '.join(f'{x:.3f}s' for x in ts)})"
                + (f"; last run {cpu[-1].brief()}" if cpu else ""))

    # The true limit of a cold scan is the smaller of what the cores decompress from cold input
    # and what the disk delivers times the compression ratio (a cold local read moves the
    # disk's bytes; the lake's chunks are that many times smaller than what they decode to).
    stored = sum(f.stat().st_size for f in zst) if zst else 0
    zratio = raw_zstd / stored if stored else None
    disk_bound = runs[("read", "local")] * zratio if zratio else None
    bounds = [x for x in (limcold, disk_bound) if x]
    true_lim = min(bounds) if bounds else None
    res["true_limit"] = {"cold_input_zstd_MBps": limcold, "compression_ratio": zratio,
                         "disk_times_ratio_MBps": disk_bound, "limit_MBps": true_lim}
    if true_lim:
        log(f"  true limit: {true_lim:,.0f} MB/s (cold-input zstd -d x{jobs}: {limcold:,.0f}; "
            f"disk {runs[('read', 'local')]:,.0f} MB/s x ratio {zratio:.2f} = {disk_bound:,.0f})")
    for method, label in (("read", f"cold scan read() {a.read_size // 1024}K"),
                          ("mmap", "cold scan np.load mmap")):
        v = runs[(method, "mount")]
        cpu = res[f"cold_{method}_mount"]["cpu"][-1]
        if cpu["daemon_cpu_s"] is not None:
            log(f"  cold {method} through the mount: daemon {cpu['daemon_cpu_s'] / cpu['wall_s']:.2f} "
                f"CPU s per wall s")
        ctx.add(1, label, v, "MB/s", "true limit: min(cold-input zstd -d, disk x ratio)", true_lim,
                target=("ratio", 0.7))
        ctx.add(1, label, v, "MB/s", f"zstd -d x{jobs}, warm input", lim)
        ctx.add(1, label, v, "MB/s", "zstd -d x1", lim1)
        ctx.add(1, label, v, "MB/s", f"zstd -d x{jobs}, cold .zst", limcold)
        ctx.add(1, label, v, "MB/s", f"local .npy cold {method}", runs[(method, "local")])


def case2(ctx, res):
    """Warm re-read: mount vs local .npy in the page cache (runs interleaved, so that load from
    other processes hits both sides alike)."""
    a = ctx.args
    ts = {(m, w): [] for m in ("read", "mmap") for w in ("mount", "local", "local_m")}
    nb = {}
    with ctx.mount() as m:
        path = m.file()
        scan_read(path, a.read_size)  # warm-up pass (cold)
        # The local file cached by mmap faults (readahead's folios) for "local_m", measured
        # first; then dropped and cached by read(), as the mount's was, for "local".
        ctx.cache.drop()
        scan_mmap(ctx.npy, a.mmap_block)
        for method in ("read", "mmap"):
            for _ in range(a.reps):
                n, dt = (scan_read(ctx.npy, a.read_size) if method == "read"
                         else scan_mmap(ctx.npy, a.mmap_block))
                ts[(method, "local_m")].append(dt)
                nb[(method, "local_m")] = n
        census_local_m = folio_census(ctx.npy)
        ctx.cache.drop()
        scan_read(path, a.read_size)
        warm_files([ctx.npy])
        res["folios_KiB_to_pages"] = {"mount": folio_census(path), "local_read": folio_census(ctx.npy),
                                      "local_mmap": census_local_m}
        log(f"  page cache, first 64 MiB, pages by folio size (KiB): mount "
            f"{res['folios_KiB_to_pages']['mount']}; local cached by read() "
            f"{res['folios_KiB_to_pages']['local_read']}; by mmap {census_local_m}")
        cpu = {"read": [], "mmap": []}
        for _ in range(a.reps):
            for method in ("read", "mmap"):
                for where, p in (("mount", path), ("local", ctx.npy)):
                    with CpuMeter(m.pid) as c:
                        n, dt = (scan_read(p, a.read_size) if method == "read"
                                 else scan_mmap(p, a.mmap_block))
                    if where == "mount":
                        cpu[method].append(c.daemon_s)
                    ts[(method, where)].append(dt)
                    nb[(method, where)] = n
        res["daemon_stats"] = m.stats()
        res["daemon_cpu_s_per_warm_pass"] = cpu
    v = {}
    for (method, where), t in ts.items():
        v[(method, where)] = nb[(method, where)] / MB / med(t)
        res[f"warm_{method}_{where}"] = {"bytes": nb[(method, where)], "seconds": t,
                                         "MBps": v[(method, where)]}
        log(f"  warm {method:4s} {where:5s}: {v[(method, where)]:,.0f} MB/s (median of {len(t)}; "
            f"min {nb[(method, where)] / MB / max(t):,.0f}, max {nb[(method, where)] / MB / min(t):,.0f})")
    ctx.add(2, f"warm re-read read() {a.read_size // 1024}K", v[("read", "mount")], "MB/s",
            "local .npy page cache read()", v[("read", "local")], target=("ratio", 0.9))
    ctx.add(2, "warm re-read np.load mmap", v[("mmap", "mount")], "MB/s",
            "local .npy page cache mmap", v[("mmap", "local")], target=("ratio", 0.9))
    ctx.add(2, "warm re-read read()", v[("read", "mount")], "MB/s",
            "local .npy cached by mmap, read()", v[("read", "local_m")])
    ctx.add(2, "warm re-read np.load mmap", v[("mmap", "mount")], "MB/s",
            "local .npy cached by mmap, mmap", v[("mmap", "local_m")])


def case3(ctx, res):
    """Random rows: mount vs local, cold and warm, mmap (np.array(a[i])) and pread."""
    random_rows(ctx, res, 3, None)


def case10(ctx, res):
    """Random rows on a column twice cache_mem: every miss decodes a whole chunk for one row."""
    col_mib = ctx.data["rows"] * ctx.data["row_bytes"] / MiB
    cache_mib = max(16, int(col_mib / 2))
    res["cache_mem"] = f"{cache_mib}M"
    log(f"  column {col_mib:.0f} MiB, cache_mem={cache_mib}M")
    random_rows(ctx, res, 10, f"{cache_mib}M")


def random_rows(ctx, res, case, cache_mem):
    """Case 3's measurement, the mount with cache_mem (None: the run's)."""
    a = ctx.args
    rows, rb = ctx.data["rows"], ctx.data["row_bytes"]
    idx = np.random.default_rng(a.seed + 3).integers(0, rows, a.random_rows).tolist()
    n = len(idx)
    res["indices"] = n
    res["row_bytes"] = rb
    v, dm, dcpu, dtime = {}, {}, {}, {}
    for method in ("mmap", "pread"):
        fn = ((lambda p: random_mmap(p, idx)) if method == "mmap"
              else (lambda p: random_pread(p, idx, rb)))
        for where in ("mount", "local"):
            cold, warm, stats, disk = [], [], [], []
            for _ in range(a.cold_reps):
                if where == "mount":
                    with ctx.mount(cache_mem=cache_mem) as m:
                        path = m.file()
                        os.stat(path)
                        ctx.cache.drop()
                        s0 = m.stats()
                        with CpuMeter(m.pid) as c, DiskMeter(ctx.npy) as d:
                            cold.append(fn(path))
                        dtime[method] = load_time_per_row(s0, m.stats(), n)
                        res.setdefault(f"cold_{method}_mount_cpu", []).append(c.as_dict())
                        dcpu[method] = c
                        warm.append(fn(path))
                        stats.append(m.stats())
                else:
                    ctx.cache.drop()
                    with DiskMeter(ctx.npy) as d:
                        cold.append(fn(ctx.npy))
                    warm.append(fn(ctx.npy))
                disk.append(d)
            dm[(method, where)] = disk[-1]
            # What a cold row cost the disk (the lake and the local file share it).
            res[f"cold_{method}_{where}_disk"] = [{"reads": d.reads, "bytes": d.bytes}
                                                  for d in disk]
            for state, ts in (("cold", cold), ("warm", warm)):
                v[(method, where, state)] = n / med(ts)
                res[f"{state}_{method}_{where}"] = {"seconds": ts, "rows_per_s": n / med(ts),
                                                    "MBps": n * rb / MB / med(ts)}
            if where == "mount":
                res[f"{method}_mount_daemon_stats"] = stats
            log(f"  random {method:5s} {where:5s}: cold {v[(method, where, 'cold')]:,.0f} "
                f"rows/s, warm {v[(method, where, 'warm')]:,.0f} rows/s"
                + (f"; cold: {disk[-1].per(n)}" if disk[-1].per(n) else "")
                + (f"; {daemon_per_row(dcpu[method], n)}" if where == "mount" else "")
                + (f"; {dtime[method]}" if where == "mount" and dtime[method] else ""))
    for state in ("cold", "warm"):
        for method, label in (("mmap", "np.array(mm[i])"), ("pread", "pread(row)")):
            cost = ""
            if state == "cold" and dm[(method, "mount")].per(n):
                cost = (f"; a row cost the disk {dm[(method, 'mount')].per(n)} "
                        f"(local: {dm[(method, 'local')].per(n)})")
            if state == "cold" and method in dcpu and daemon_per_row(dcpu[method], n):
                cost += f"; {daemon_per_row(dcpu[method], n)}"
            if state == "cold" and dtime.get(method):
                cost += f"; {dtime[method]}"
            ctx.add(case, f"{state} random {n} rows {label}", v[(method, "mount", state)],
                    "rows/s", f"local .npy {state}", v[(method, "local", state)],
                    note=f"{rb} B rows" + (f", cache_mem={cache_mem}" if cache_mem else "") + cost,
                    target=("ratio", 0.5) if case == 10 else None)


def daemon_per_row(c, n):
    """What a cold row cost the daemon's CPU (a CpuMeter over n rows), or '' where not known:
    with the disk's cost per row, where a cold row's time goes."""
    if c.daemon_s is None or not n:
        return ""
    return (f"daemon CPU {c.daemon_s / n * 1e6:.0f} us a row (user "
            f"{c.daemon_user_s / n * 1e6:.0f}, sys {c.daemon_sys_s / n * 1e6:.0f})")


def load_time_per_row(s0, s1, n):
    """The daemon's time in chunk loads (fetch, checks, decode) a row between two stats
    snapshots, and in store reads (the disk's or the network's share), both summed over its
    threads; '' where the daemon does not count them."""
    try:
        load = s1["cache"]["load_s"] - s0["cache"]["load_s"]
        read = s1["store"]["read_s"] - s0["store"]["read_s"]
    except (KeyError, TypeError):
        return ""
    return (f"loads {load / n * 1e6:.0f} us a row, store reads {read / n * 1e6:.0f}"
            if n else "")


def case4(ctx, res):
    """Time to first batch: launch `tensorfs mount` -> first 64 rows in a numpy array."""
    a = ctx.args
    out = {}
    for state in ("cold", "warm"):
        tot, up, load = [], [], []
        for _ in range(a.ttfb_reps):
            if state == "cold":
                ctx.cache.drop()
            else:
                warm_files([ctx.bin])
            m = ctx.mount()
            try:
                m.launch()
                m.wait_up(poll=0.0005)
                arr = np.load(m.file(), mmap_mode="r")
                batch = np.array(arr[:64])
                t1 = time.perf_counter()
                del arr
                assert batch.shape[0] == min(64, ctx.data["rows"])
            finally:
                m.stop()
            tot.append((t1 - m.t_launch) * 1e3)
            up.append((m.t_up - m.t_launch) * 1e3)
            load.append((t1 - m.t_up) * 1e3)
        out[state] = {"total_ms": tot, "mount_up_ms": up, "first_batch_after_up_ms": load,
                      "median_ms": med(tot)}
        log(f"  TTFB {state}: median {med(tot):.1f} ms (mount up {med(up):.1f} ms + "
            f"first batch {med(load):.1f} ms); runs {', '.join(f'{x:.0f}' for x in tot)}")
    loc = []
    for _ in range(a.ttfb_reps):
        ctx.cache.drop()
        t0 = time.perf_counter()
        arr = np.load(ctx.npy, mmap_mode="r")
        np.array(arr[:64])
        loc.append((time.perf_counter() - t0) * 1e3)
        del arr
    out["local_cold_ms"] = loc
    res.update(out)
    log(f"  local .npy cold first batch: median {med(loc):.2f} ms")
    ctx.add(4, "time to first batch, cold (mount+64 rows)", med(out["cold"]["total_ms"]), "ms",
            "local .npy cold np.load+64 rows", med(loc), better="lower", target=("max", 200.0))
    ctx.add(4, "time to first batch, warm lake", med(out["warm"]["total_ms"]), "ms",
            "local .npy cold np.load+64 rows", med(loc), better="lower", target=("max", 200.0))


def case5(ctx, res):
    """Scan a column 4x larger than cache_mem; peak daemon RSS vs the budget."""
    a = ctx.args
    data_bytes = ctx.data["data_bytes"]
    budget_mib = max(1, round(data_bytes / a.rss_factor / MiB))
    budget = budget_mib * MiB
    limit = budget + a.rss_slack_mib * MiB
    res.update({"cache_mem": f"{budget_mib}M", "budget_bytes": budget, "limit_bytes": limit,
                "data_bytes": data_bytes, "factor": data_bytes / budget})
    m = ctx.mount(cache_mem=f"{budget_mib}M")
    with m:
        path = m.file()
        os.stat(path)
        ctx.cache.drop()
        base = proc_status(m.pid, "VmRSS")
        with contextlib.suppress(OSError):  # reset VmHWM to the current RSS (Linux >= 4.0)
            with open(f"/proc/{m.pid}/clear_refs", "w") as f:
                f.write("5")
        with RssSampler(m.pid) as s:
            with CpuMeter(m.pid) as c1:
                n, dt = scan_read(path, a.read_size)
            ctx.cache.drop()  # else the mmap pass is served by the kernel page cache
            with CpuMeter(m.pid) as c2:
                n2, dt2 = scan_mmap(path, a.mmap_block)
        res["cpu_read"], res["cpu_mmap"] = c1.as_dict(), c2.as_dict()
        hwm = proc_status(m.pid, "VmHWM")
        res["daemon_stats"] = m.stats()
    peak = max(s.peak, hwm or 0)
    res.update({"baseline_rss": base, "peak_rss_sampled": s.peak, "vm_hwm": hwm,
                "peak_rss": peak, "samples": s.samples, "growth": peak - (base or 0),
                "scan_read_MBps": n / MB / dt, "scan_mmap_MBps": n2 / MB / dt2})
    log(f"  cache_mem={budget_mib}M, scanned {data_bytes / MiB:.0f} MiB twice, cold "
        f"(read {n / MB / dt:,.0f} MB/s, mmap {n2 / MB / dt2:,.0f} MB/s): baseline RSS "
        f"{(base or 0) / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB (sampled {s.peak / MiB:.1f}, "
        f"VmHWM {(hwm or 0) / MiB:.1f}; {s.samples} samples)")
    lim_label = f"budget {budget_mib} + {a.rss_slack_mib} MiB"
    ctx.add(5, f"peak daemon RSS, scan {data_bytes / budget:.0f}x cache_mem", peak / MiB, "MiB",
            lim_label, limit / MiB, better="lower", target=("max", limit / MiB),
            note=f"baseline RSS {(base or 0) / MiB:.1f} MiB")
    ctx.add(5, "daemon RSS growth (peak - baseline)", (peak - (base or 0)) / MiB, "MiB",
            lim_label, limit / MiB, better="lower", target=("max", limit / MiB))
    ctx.add(5, f"cold scan read() with cache_mem={budget_mib}M", n / MB / dt, "MB/s",
            "case-1 zstd limit" if ctx.cases.get(1, {}).get("zstd", {}).get(
                f"limit_{a.jobs}proc_MBps") else None,
            ctx.cases.get(1, {}).get("zstd", {}).get(f"limit_{a.jobs}proc_MBps"))


class NpyRows:
    """Map-style dataset: row i of a .npy as a tensor; the memmap opens lazily (per worker)."""

    def __init__(self, path, n):
        self.path, self.n, self.mm = str(path), n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        if self.mm is None:
            self.mm = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.mm[i]))


def case6(ctx, res):
    """PyTorch DataLoader over the mount vs over the local .npy, workers 0 and 2, cold/warm."""
    a = ctx.args
    t0 = time.perf_counter()
    import torch
    from torch.utils.data import DataLoader
    res["torch"] = torch.__version__
    res["torch_import_s"] = time.perf_counter() - t0
    n = min(a.dl_rows, ctx.data["rows"])
    res["rows"] = n
    res["batch_size"] = a.batch_size

    def epochs(path, w):
        out = []
        ds = NpyRows(path, n)
        g = torch.Generator()
        g.manual_seed(a.seed)
        dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, generator=g,
                        num_workers=w, persistent_workers=False)
        for _ in range(2):  # epoch 1 cold, epoch 2 warm (a new shuffle of the same rows)
            t = time.perf_counter()
            got = 0
            for b in dl:
                got += b.shape[0]
            out.append(time.perf_counter() - t)
            if got != n:
                raise BenchError(f"DataLoader yielded {got} rows, expected {n}")
        ds.mm = None
        del dl, ds
        gc.collect()
        return out

    v = {}
    for w in a.workers:
        for where in ("mount", "local"):
            cold, warm = [], []
            for _ in range(a.cold_reps):
                if where == "mount":
                    with ctx.mount() as m:
                        os.stat(m.file())
                        ctx.cache.drop()
                        c, wm = epochs(m.file(), w)
                        res.setdefault(f"w{w}_mount_daemon_stats", []).append(m.stats())
                else:
                    ctx.cache.drop()
                    c, wm = epochs(ctx.npy, w)
                cold.append(c)
                warm.append(wm)
            for state, ts in (("cold", cold), ("warm", warm)):
                v[(w, where, state)] = n / med(ts)
                res[f"w{w}_{where}_{state}"] = {"seconds": ts, "samples_per_s": n / med(ts)}
            log(f"  DataLoader workers={w} {where:5s}: cold {v[(w, where, 'cold')]:,.0f} "
                f"samples/s, warm {v[(w, where, 'warm')]:,.0f} samples/s")
    for state in ("cold", "warm"):
        for w in a.workers:
            ctx.add(6, f"DataLoader {state} epoch, workers={w}", v[(w, "mount", state)],
                    "samples/s", f"same over local .npy {state}", v[(w, "local", state)],
                    note=f"{n} rows, batch {a.batch_size}, shuffle")


def case7(ctx, res):
    """Shuffled view scan (front to back, cold) vs random mmap access of a local .npy (a uniform
    shuffle of every row, cold), vs a sequential scan of the unshuffled version (mount, cold)."""
    a = ctx.args
    rows, rb = ctx.data["rows"], ctx.data["row_bytes"]
    view = f"seed={a.seed},epoch=0"
    block = max(1, (1 << 20) // rb)  # rows per np.asarray: about 1 MiB
    times = {"view": [], "seq": [], "local_random": []}
    order = np.random.default_rng(a.seed + 7).permutation(rows).tolist()
    for _ in range(a.cold_reps):
        with ctx.mount() as m:
            vpath = m.path / DATASET / "main" / "views" / view / f"{COLUMN}.npy"
            os.stat(vpath)
            ctx.cache.drop()
            t0 = time.perf_counter()
            mm = np.load(vpath, mmap_mode="r")
            for i in range(0, mm.shape[0], block):
                np.asarray(mm[i:i + block]).copy()
            times["view"].append(time.perf_counter() - t0)
            del mm
            res.setdefault("view_daemon_stats", []).append(m.stats())
        with ctx.mount() as m:
            path = m.file()
            os.stat(path)
            ctx.cache.drop()
            times["seq"].append(scan_mmap(path, a.mmap_block)[1])
        ctx.cache.drop()
        times["local_random"].append(random_mmap(ctx.npy, order))
    nbytes = rows * rb
    v = {k: nbytes / MB / med(ts) for k, ts in times.items()}
    res.update({k: {"seconds": ts, "MBps": v[k]} for k, ts in times.items()})
    log(f"  shuffled view scan {v['view']:,.0f} MB/s, local random mmap "
        f"{v['local_random']:,.0f} MB/s, sequential scan of the version {v['seq']:,.0f} MB/s")
    ctx.add(7, "cold shuffled view scan (np.load mmap)", v["view"], "MB/s",
            "local .npy cold, random mmap of every row", v["local_random"],
            target=("ratio", 3.0))
    ctx.add(7, "cold shuffled view scan (np.load mmap)", v["view"], "MB/s",
            "mount cold sequential scan of the version", v["seq"])


CASES = {
    1: ("cold sequential scan of a zstd column", case1),
    2: ("warm re-read", case2),
    3: ("random-row access", case3),
    4: ("time to first batch", case4),
    5: ("scan 4x cache_mem: daemon RSS", case5),
    6: ("PyTorch DataLoader", case6),
    7: ("shuffled view scan", case7),
    8: ("shuffled view epoch vs a DataLoader over JPEG files", case8),
    9: ("images: import decode rate and training read vs ImageFolder", case9),
    10: ("random-row access, column 2x cache_mem", case10),
}
