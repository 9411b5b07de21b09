#!/usr/bin/env python3
"""DBCC CHECKDB throughput benchmark (issue 6; seed 004's CHECKDB article).

Builds a database of --size-gb GB (a clustered table of 8 KB rows, one row per page), stops
the instance, then in one run measures:
  - baseline: sequential read of the same data files with dd (bs=1M), cold (the files'
    pages dropped from the page cache with posix_fadvise DONTNEED after a sync) and warm;
  - extentdb: `extentdb checkdb` with PHYSICAL_ONLY and full checks at each MAXDOP in
    --maxdop (default 1 and 2, and the core count where it is larger), cold and warm. The
    throughput is the bytes of pages the check read over its wall time (process start and
    catalog read included).
  - With --files N (N > 1; issue 22, seed 004's later article) the data is spread over N
    files and every check runs also with trace flag 2549 (`-T 2549`: each file read as its
    own drive, check_db.rs `RunQueue`), so the flag's effect shows per MAXDOP as the ratio
    of the two. Trace flag 2562 (one batch) is how every extentdb check runs, so it has no
    case of its own.
Each check is paired with a dd read of the same files just before it (the disk's speed
drifts on a shared machine); prints each figure with the median of its ratios to those
reads, and the full/PHYSICAL_ONLY ratio, and writes JSON to bench/results/<date>-<host>-checkdb.json.
Goals (issue 6): PHYSICAL_ONLY >= 80% of the read speed; full >= 50% of PHYSICAL_ONLY.

Usage: bench/checkdb.py [--size-gb N] [--files N] [--dir PATH] [--binary PATH] [--keep]
"""
import argparse, datetime, json, os, re, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import BINARY, dd_read, drop_cache, filled_database_sql, host, median, results_path  # noqa: E402


def checkdb(binary, inst, db, physical, maxdop, flags=()):
    args = [binary, "checkdb", "--data-dir", inst, "--database", db, "--no-infomsgs",
            "--stats", "--maxdop", str(maxdop)]
    if physical:
        args.append("--physical-only")
    for f in flags:
        args += ["-T", str(f)]
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"checkdb failed:\n{p.stdout}\n{p.stderr}")
    m = re.search(r"(\d+) bytes read in", p.stderr)
    if not m:
        sys.exit(f"no stats:\n{p.stderr}")
    return int(m.group(1)), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=4.0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--binary", default=BINARY)
    ap.add_argument("--maxdop", default=None, help="comma-separated list (default 1,2[,cores])")
    ap.add_argument("--rounds", type=int, default=3, help="median of this many runs each")
    ap.add_argument("--files", type=int, default=1, help="data files (2549 measured when > 1)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    dops = [int(x) for x in a.maxdop.split(",")] if a.maxdop else sorted({1, 2, cores})
    work = tempfile.mkdtemp(prefix="xdb-bench-checkdb-", dir=a.dir)
    inst = os.path.join(work, "inst")
    try:
        subprocess.run([a.binary, "setup", "--data-dir", inst, "--tempdb-files", "1"],
                       check=True, capture_output=True)
        t = time.perf_counter()
        sql, rows = filled_database_sql("CK", a.size_gb, int(a.size_gb * 1024) + 256, 2048,
                                        files=a.files)
        sql += " SELECT COUNT(*) FROM t;"
        p = subprocess.run([a.binary, "exec", "--data-dir", inst, "-b", "-Q", sql],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"building the database failed:\n{p.stdout[-3000:]}\n{p.stderr}")
        built = time.perf_counter() - t
        files = [os.path.join(inst, "data", "CK.mdf")] + [
            os.path.join(inst, "data", f"CK_{i}.ndf") for i in range(2, a.files + 1)]
        flag_sets = [()] + ([(2549,)] if a.files > 1 else [])
        size = sum(os.path.getsize(f) for f in files)
        print(f"database: {rows} rows, data file {size / 1e9:.2f} GB, built in {built:.0f} s")

        results = {}
        for cache in ("cold", "warm"):
            def prep():
                if cache == "cold":
                    drop_cache(files)
                else:
                    dd_read(files)
            # The disk's speed drifts on a shared machine: every check is paired with a dd
            # read just before it, and ratios are medians of the pairs' ratios.
            reads = []
            results[cache] = {"checks": []}
            print(f"\n{cache} cache:")
            for physical in (True, False):
                for dop in dops:
                    for flags in flag_sets:
                        speeds, ratios = [], []
                        for _ in range(a.rounds):
                            prep()
                            n, s = dd_read(files)
                            base = n / s
                            reads.append(base)
                            prep()
                            n, s = checkdb(a.binary, inst, "CK", physical, dop, flags)
                            speeds.append(n / s)
                            ratios.append((n / s) / base)
                        mode = "PHYSICAL_ONLY" if physical else "full"
                        v, r = median(speeds), median(ratios)
                        results[cache]["checks"].append(
                            {"mode": mode, "maxdop": dop, "trace_flags": list(flags),
                             "MBps": v / 1e6, "ratio_to_read": r})
                        tf = " -T 2549" if flags else ""
                        print(f"  CHECKDB {mode:13} MAXDOP {dop}{tf:9}: {v / 1e6:7.0f} MB/s  "
                              f"{r:5.2f}x the dd read before it")
            results[cache]["read_MBps"] = median(reads) / 1e6
            results[cache]["read_MBps_min_max"] = [min(reads) / 1e6, max(reads) / 1e6]
            print(f"  dd read: median {median(reads) / 1e6:.0f} MB/s "
                  f"(from {min(reads) / 1e6:.0f} to {max(reads) / 1e6:.0f})")
            def check(mode, dop, flags=()):
                return next(c for c in results[cache]["checks"] if c["mode"] == mode
                            and c["maxdop"] == dop and c["trace_flags"] == list(flags))
            for dop in dops:
                r = check("full", dop)["MBps"] / check("PHYSICAL_ONLY", dop)["MBps"]
                results[cache].setdefault("full_over_physical", {})[str(dop)] = r
                print(f"  full / PHYSICAL_ONLY at MAXDOP {dop}: {r:.2f}")
                if a.files > 1:
                    for mode in ("PHYSICAL_ONLY", "full"):
                        r = check(mode, dop, (2549,))["MBps"] / check(mode, dop)["MBps"]
                        results[cache].setdefault("tf2549_over_default", {})[f"{mode} {dop}"] = r
                        print(f"  -T 2549 / default, {mode} at MAXDOP {dop}: {r:.2f}")
        out = {
            "benchmark": "checkdb",
            "date": datetime.date.today().isoformat(),
            "host": host(),
            "cores": cores,
            "rows": rows,
            "files": a.files,
            "data_file_bytes": size,
            "rounds": a.rounds,
            "results": results,
        }
        path = results_path("checkdb")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"\nwrote {path}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
