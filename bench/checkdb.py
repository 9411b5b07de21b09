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

With --computed-rows N (issue 22 item 4; seed 004's later article: an index on a computed
column slows SQL Server's CHECKDB, which computes the column again for every row) it runs
only that case: three databases of one table of N identical rows (id PRIMARY KEY, a, b,
w = a * 7 + b stored, v AS a * 7 + b not PERSISTED, a pad; an index on a in each), the
first with no other index, the second with an index on the stored w, the third with an
index on the computed v (the same values, so the same index pages). Full `extentdb
checkdb` (MAXDOP --maxdop's first value, warm cache) of each, in interleaved rounds whose
order rotates; prints the median time of each and the median of each round's ratios
(v-index / no index, v-index / w-index: the cost of computing the value, apart from that
of checking one more index), and writes JSON to bench/results/<date>-<host>-checkdb-computed.json.

Usage: bench/checkdb.py [--size-gb N] [--files N] [--dir PATH] [--binary PATH] [--keep]
       bench/checkdb.py --computed-rows N [--rounds R] [--maxdop D] [--binary PATH]
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


COMPUTED_CASES = (("CN", "no index on w or v", ""),
                  ("CW", "index on stored w", "CREATE INDEX ix_w ON t (w);"),
                  ("CV", "index on computed v", "CREATE INDEX ix_v ON t (v);"))


def computed_sql(rows):
    """The three databases of the --computed-rows case: CN filled row by row, the others
    copies of its rows, then each one's indexes."""
    table = ("CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, "
             "w INT NOT NULL, v AS a * 7 + b, pad CHAR(60));")
    sql = "".join(f"CREATE DATABASE {db} ON (NAME = {db}, FILENAME = '{db}.mdf', SIZE = 64MB) "
                  f"LOG ON (NAME = {db}_log, FILENAME = '{db}_log.ldf', SIZE = 64MB); "
                  f"USE {db}; {table} " for db, _, _ in COMPUTED_CASES)
    sql += (f"USE CN; SET NOCOUNT ON; DECLARE @i INT = 0; BEGIN TRAN; WHILE @i < {rows} BEGIN "
            "INSERT t (id, a, b, w, pad) VALUES (@i, (@i * 31) % 10007, @i % 13, "
            "((@i * 31) % 10007) * 7 + @i % 13, 'x'); SET @i += 1; "
            "IF @i % 10000 = 0 BEGIN COMMIT; BEGIN TRAN; END END; COMMIT; ")
    for db, _, index in COMPUTED_CASES:
        if db != "CN":
            sql += (f"INSERT INTO {db}.dbo.t (id, a, b, w, pad) "
                    "SELECT id, a, b, w, pad FROM CN.dbo.t; ")
        sql += f"USE {db}; CREATE INDEX ix_a ON t (a); {index} SELECT COUNT(*) FROM t; "
    return sql


def computed_case(a, dop):
    """The --computed-rows case (module docs)."""
    work = tempfile.mkdtemp(prefix="xdb-bench-checkdb-computed-", dir=a.dir)
    inst = os.path.join(work, "inst")
    try:
        subprocess.run([a.binary, "setup", "--data-dir", inst, "--tempdb-files", "1"],
                       check=True, capture_output=True)
        t = time.perf_counter()
        p = subprocess.run([a.binary, "exec", "--data-dir", inst, "-b", "-Q",
                            computed_sql(a.computed_rows)], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"building the databases failed:\n{p.stdout[-3000:]}\n{p.stderr}")
        print(f"databases: 3 x {a.computed_rows} rows, built in {time.perf_counter() - t:.0f} s")
        dbs = [db for db, _, _ in COMPUTED_CASES]
        for db in dbs:  # warm the page cache, and fail early on any finding
            checkdb(a.binary, inst, db, False, dop)
        times = {db: [] for db in dbs}
        ratios = {"CV/CN": [], "CV/CW": [], "CW/CN": []}
        for r in range(a.rounds):
            order = dbs[r % 3:] + dbs[:r % 3]
            took = {}
            for db in order:
                n, took[db] = checkdb(a.binary, inst, db, False, dop)
                times[db].append(took[db])
            for k in ratios:
                x, y = k.split("/")
                ratios[k].append(took[x] / took[y])
            print(f"  round {r + 1} ({' '.join(order)}): "
                  + "  ".join(f"{db} {took[db]:.3f} s" for db in dbs))
        for db, what, _ in COMPUTED_CASES:
            print(f"  CHECKDB full MAXDOP {dop}, {what:22}: median {median(times[db]):.3f} s")
        for k, v in ratios.items():
            print(f"  {k}: median {median(v):.3f} (from {min(v):.3f} to {max(v):.3f})")
        out = {
            "benchmark": "checkdb-computed",
            "date": datetime.date.today().isoformat(),
            "host": host(),
            "rows": a.computed_rows,
            "maxdop": dop,
            "rounds": a.rounds,
            "cases": {db: what for db, what, _ in COMPUTED_CASES},
            "seconds": times,
            "ratios": ratios,
            "median_ratios": {k: median(v) for k, v in ratios.items()},
        }
        write_results("checkdb-computed", out)
    finally:
        clean_up(work, a.keep)


def write_results(name, out):
    """The run's JSON under bench/results/, named by `name`."""
    path = results_path(name)
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"\nwrote {path}")


def clean_up(work, keep):
    """Removes the run's directory unless --keep."""
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=4.0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--binary", default=BINARY)
    ap.add_argument("--maxdop", default=None, help="comma-separated list (default 1,2[,cores])")
    ap.add_argument("--rounds", type=int, default=3, help="median of this many runs each")
    ap.add_argument("--files", type=int, default=1, help="data files (2549 measured when > 1)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--computed-rows", type=int, default=0,
                    help="run only the index-on-a-computed-column case with this many rows")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    dops = [int(x) for x in a.maxdop.split(",")] if a.maxdop else sorted({1, 2, cores})
    if a.computed_rows:
        return computed_case(a, dops[0])
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
        write_results("checkdb", out)
    finally:
        clean_up(work, a.keep)


if __name__ == "__main__":
    main()
