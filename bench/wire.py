#!/usr/bin/env python3
"""Wire benchmark (issue 20, item 9): extentdb against PostgreSQL measured the same way.

Both engines run as servers on 127.0.0.1 and are driven over TCP by one Go program,
bench/wire/ (database/sql with each engine's standard driver: github.com/microsoft/go-mssqldb
for extentdb's TDS, github.com/jackc/pgx/v5/stdlib for PostgreSQL), with the same statements
(only the placeholder differs: @p1 against $1), the same keys (one seeded random permutation),
the same rows and the same durability: extentdb commits every autocommit statement durably;
PostgreSQL runs with fsync, synchronous_commit and full_page_writes on. Workloads:

  select1         SELECT 1 round trips, 1 and 8 connections
  seed004_insert  seed 004's statement, INSERT INTO bigrows DEFAULT VALUES (c1 INT IDENTITY,
                  c2 CHAR(8000) DEFAULT 'a'), autocommit, 1 and 8 connections
  bulk_load       --bulk-rows rows through one prepared INSERT (k, x, CHAR(200) pad) in one
                  transaction, keys in the permutation's order, COMMIT inside the time
  point_select    SELECT x, pad FROM kv WHERE k = ? on a --rows-row table, 1 and 8 connections
  update_by_key   UPDATE kv SET x = x + 1 WHERE k = ?, autocommit, 1 and 8 connections
  scan_aggregate  SELECT COUNT(*), SUM(x) FROM kv, 1 connection

--family concurrency (issue 21) runs instead, each at 1, 2, 4 and 8 connections (--conns):

  point_select      as above
  update_by_key     as above
  insert_clustered  INSERT INTO ins (k, x, pad) VALUES (?, ?, ?), autocommit, into a table
                    clustered on k; every connection its own ascending run of new keys
  tpcb              pgbench's built-in TPC-B-like transaction (UPDATE accounts, SELECT
                    abalance, UPDATE tellers, UPDATE branches, INSERT history) between BEGIN
                    TRANSACTION and COMMIT TRANSACTION, written once in the harness and sent
                    with parameters; --tpcb-branches branches (10 tellers each) and
                    --tpcb-accounts accounts a branch; a deadlock victim is run again with the
                    same keys and counted (retries)

--family index (issue 22) loads one table ix (k INT PRIMARY KEY, s INT NOT NULL, x INT, CHAR(100)
pad) of --rows rows (1,000,000 unless given; s a random permutation of 1..rows, so the k and
s orders are unrelated), builds CREATE INDEX ix_s ON ix (s) (PostgreSQL also ANALYZEs), and
runs:

  point_clustered   SELECT x, pad FROM ix WHERE k = ?, 1 and 8 connections
  point_index       SELECT x, pad FROM ix WHERE s = ?, the same through the index (a seek
                    and a lookup of the row by its clustered key)
  range_index_1pct  SELECT COUNT(*), SUM(x) FROM ix WHERE s BETWEEN ? AND ? over 1% of the
                    rows through the index, 1 connection
  join_selective    SELECT COUNT(*), SUM(ix.x) FROM iy JOIN ix ON ix.k = iy.ixk WHERE iy.y = ?:
                    iy has a tenth of ix's rows and no index on y (a scan), 1 in 1,000 of its
                    rows joined to ix by its clustered key, 1 connection
  group_by_whole    SELECT x % 100, COUNT(*), SUM(CAST(s AS BIGINT)) FROM ix GROUP BY x % 100
  count_sum_whole   SELECT COUNT(*), SUM(CAST(x AS BIGINT)) FROM ix

The wire and concurrency families check afterwards that each engine holds every acknowledged insert and that the TPC-B
balances of accounts, tellers and branches each sum to the history's deltas, with one
history row per committed transaction (the JSON's "checks"). --no-postgres runs extentdb
alone (bench/report.py's quick mode does, for its gates).

Every figure is --rounds runs per engine, rounds interleaved in alternating order (extentdb
first in odd rounds, PostgreSQL first in even ones); it reports the median, minimum and
maximum rate and the ratio of the medians extentdb / PostgreSQL. Memory per workload: each
server's peak RSS (VmHWM from /proc/PID/status, reset through /proc/PID/clear_refs before the
workload; PostgreSQL's summed over the postmaster and its children, which counts shared
buffers once per process that touched them) and the peak of the summed proportional set size
(Pss) sampled every 200 ms. CPU per operation: the server's (utime + stime from
/proc/PID/stat over the engine's processes) and the client's (the harness's getrusage, less
its memory sampling) over each run's timed part, divided by its operations; the table gives
the medians, and the ratio of the servers' (extentdb / PostgreSQL; lower is better), since
on a machine whose cores the client shares the rate is bounded by their sum. Before each
round of the single-connection commit-bound figures (seed004_insert, update_by_key) bare
pwrite + fdatasync loops run for a second each on the same file system, with 512-byte writes
(extentdb's log sector) and 8 KiB writes (PostgreSQL's WAL page): the durable-commit
ceilings of that moment. A workload that fails against an engine is reported as failed with
the server's message. Nothing asserts a timing.

Writes bench/results/<date>-<host>-wire.json (-concurrency.json, -index.json for those; or into
$XDB_RESULTS_DIR; with --quick, --only or --no-postgres into bench/tmp/quick/, so a smoke
test never overwrites the full figures).

Usage: bench/wire.py [--family wire|concurrency|index] [--seconds S] [--rounds R] [--rows N]
                     [--bulk-rows N] [--conns 1,2,4,8] [--tpcb-branches N] [--tpcb-accounts N]
                     [--only a,b] [--no-postgres] [--dir PARENT] [--quick]
Needs Go (the modules come from the Go module proxy) and root or an installed PostgreSQL.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from data_path import Postgres, run  # noqa: E402
from tds import PASSWORD, Server  # noqa: E402

WIRE = os.path.join(lib.ROOT, "bench", "wire")
# Seconds per run of the quick concurrency family: 4 workloads x 4 connection counts x 2
# rounds of extentdb alone stay near half a minute with the setup.
QUICK_CONCURRENCY_SECONDS = 0.75


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def fmt_rate(r):
    if not r or not r.get("runs"):
        return "FAILED" if r and r.get("error") else "-"
    return f"{r['median']:,.1f} [{r['min']:,.1f}-{r['max']:,.1f}]"


def fmt_us(r, key):
    v = (r or {}).get(key)
    return "-" if v is None else f"{v:,.1f}"


def cpu_cells(x, p):
    """Server CPU per operation of each engine and their ratio (lower is better), and the
    client's CPU per operation against each (medians of the runs; "-" where not measured)."""
    key = "server_cpu_us_per_op_median"
    xs, ps = x.get(key), (p or {}).get(key)
    ratio = "-" if not xs or not ps else f"{xs / ps:.2f}x"
    return (f"{fmt_us(x, key)} | {fmt_us(p, key)} | {ratio} | "
            f"{fmt_us(x, 'client_cpu_us_per_op_median')} / "
            f"{fmt_us(p, 'client_cpu_us_per_op_median')}")


def table(figs):
    lines = ["| workload | conns | unit | extentdb median [min-max] | PostgreSQL median [min-max] "
             "| extentdb / PG | extentdb peak RSS | PG peak RSS (sum) | extentdb / PG peak Pss "
             "| extentdb server CPU us/op | PG server CPU us/op | server CPU extentdb / PG "
             "| client CPU us/op (extentdb / PG) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in figs:
        x = f["engines"]["extentdb"]
        p = f["engines"].get("postgres") or {"vmhwm_sum_kb": 0, "processes": 0,
                                             "pss_peak_sampled_kb": 0}
        v = f["ratio_extentdb_to_postgres"]
        ratio = "-" if not p.get("runs") else "failed" if v is None else f"{v:.2f}x" if v >= 0.1 else f"{v:.3f}x"
        lines.append(f"| {f['name']} | {f['connections']} | {f['unit']} | {fmt_rate(x)} | "
                     f"{fmt_rate(p)} | {ratio} | {x['vmhwm_sum_kb'] / 1024:,.0f} MiB | "
                     f"{p['vmhwm_sum_kb'] / 1024:,.0f} MiB ({p['processes']} proc.) | "
                     f"{x['pss_peak_sampled_kb'] / 1024:,.0f} / {p['pss_peak_sampled_kb'] / 1024:,.0f} MiB | "
                     f"{cpu_cells(x, f['engines'].get('postgres'))} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=None, help="10,000 (1,000,000 for the index "
                    "family)")
    ap.add_argument("--bulk-rows", type=int, default=10000)
    ap.add_argument("--only", default="")
    ap.add_argument("--dir", default=os.path.join(lib.ROOT, "bench", "tmp"))
    ap.add_argument("--binary", default=lib.BINARY)
    ap.add_argument("--family", choices=("wire", "concurrency", "index"), default="wire")
    ap.add_argument("--conns", default="", help="connection counts (default 1,8; 1,2,4,8 for "
                    "the concurrency family)")
    ap.add_argument("--tpcb-branches", type=int, default=8)
    ap.add_argument("--tpcb-accounts", type=int, default=10000, help="accounts per branch")
    ap.add_argument("--no-postgres", action="store_true", help="extentdb alone")
    ap.add_argument("--quick", action="store_true", help="1 s runs, 2 rounds, 2,000 rows "
                    "(concurrency: 0.5 s runs, 1,000 accounts a branch)")
    a = ap.parse_args()
    if a.rows is None:
        a.rows = 1_000_000 if a.family == "index" else 10000
    if a.quick:
        a.seconds, a.rounds, a.rows, a.bulk_rows = 1, 2, 2000, 2000
        if a.family == "index":
            a.rows = 20000
        if a.family == "concurrency":
            a.seconds, a.tpcb_accounts = QUICK_CONCURRENCY_SECONDS, 1000
    if (a.quick or a.only or a.no_postgres) and not os.environ.get("XDB_RESULTS_DIR"):
        # A smoke test or a partial run never overwrites the full figures.
        os.environ["XDB_RESULTS_DIR"] = os.path.join(lib.ROOT, "bench", "tmp", "quick")
    started = time.time()
    if a.binary == lib.BINARY:
        run(["cargo", "build", "--release", "--bin", "extentdb"], cwd=lib.ROOT)
    os.makedirs(a.dir, exist_ok=True)
    harness = os.path.join(a.dir, "wire-harness")
    run(["go", "build", "-o", harness, "."], cwd=WIRE)
    work = tempfile.mkdtemp(prefix="wire-", dir=a.dir)
    os.chmod(work, 0o755)  # the postgres user runs initdb inside it
    srv = pg = None
    try:
        srv = Server(a.binary, work)
        srv.sqlcmd("CREATE DATABASE bench ON (NAME = bench, FILENAME = 'bench.mdf', SIZE = 2GB, "
                   "FILEGROWTH = 1GB) LOG ON (NAME = bench_log, FILENAME = 'bench_log.ldf', "
                   "SIZE = 1GB, FILEGROWTH = 512MB)")
        xdb_dsn = (f"sqlserver://sa:{urllib.parse.quote(PASSWORD, safe='')}@127.0.0.1:{srv.port}"
                   "?database=bench&encrypt=disable")
        cmd = [harness, "-xdb", xdb_dsn, "-xdb-pid", str(srv.proc.pid),
               "-seconds", str(a.seconds), "-rounds", str(a.rounds), "-rows", str(a.rows),
               "-bulk-rows", str(a.bulk_rows), "-family", a.family,
               "-tpcb-branches", str(a.tpcb_branches), "-tpcb-accounts", str(a.tpcb_accounts)]
        settings = {}
        if not a.no_postgres:
            pg = Postgres(work, tcp=True)
            with open(os.path.join(pg.data, "postmaster.pid")) as f:
                pg_pid = int(f.readline())
            settings = {k: pg.psql_c(f"SHOW {k}").strip() for k in
                        ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
                         "shared_buffers", "default_transaction_isolation")}
            if settings["synchronous_commit"] != "on" or settings["fsync"] != "on":
                sys.exit(f"PostgreSQL does not commit durably: {settings}")
            pg_dsn = f"postgres://postgres@127.0.0.1:{pg.port}/postgres?sslmode=disable"
            cmd += ["-pg", pg_dsn, "-pg-pid", str(pg_pid)]
        if not a.quick:
            # The bare fdatasync loops (single-connection commit-bound figures).
            cmd += ["-sync-dir", work]
        if a.conns:
            cmd += ["-conns", a.conns]
        if a.only:
            cmd += ["-only", a.only]
        load_before = loadavg()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"wire harness failed (exit {p.returncode})\n{p.stdout[-3000:]}")
        res = json.loads(p.stdout)
        figs = res["figures"]
        print("\n" + table(figs))
        for f in figs:
            for e, r in f["engines"].items():
                if r.get("error"):
                    print(f"FAILED: {f['name']} ({f['connections']} conn.) on {e}: {r['error']}")
        for f in figs:
            b, b8 = f.get("fdatasync_loop_512b_per_s"), f.get("fdatasync_loop_8k_per_s")
            if b:
                print(f"same rounds as {f['name']} ({f['connections']} conn.): bare pwrite + "
                      f"fdatasync loops on the same file system, 512 B {lib.median(b):,.0f}/s "
                      f"[{min(b):,.0f}-{max(b):,.0f}], 8 KiB {lib.median(b8):,.0f}/s "
                      f"[{min(b8):,.0f}-{max(b8):,.0f}]")
        print("row checks: " + json.dumps(res["checks"]))
        for e, c in res["checks"].items():
            for k, v in c.items():
                if k.endswith("_ok") and not v:
                    print(f"CHECK FAILED on {e}: {k} ({json.dumps(c)})")
        out = {"benchmark": "wire", "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
               "host": lib.host(), "quick": a.quick, "machine": lib.machine_info(work),
               "go": run(["go", "version"]).stdout.strip(),
               "family": a.family,
               "postgres_version": pg.version if pg else None, "postgres_settings": settings,
               "extentdb_settings": {"durability": "every autocommit statement and COMMIT "
                                     "waits for its log flush", "max_server_memory_mb": 1024,
                                     "database": "bench: 2 GB data, 1 GB log"},
               "load_average_before": load_before, "load_average_after": loadavg(),
               "command": lib.command_line("bench/wire.py"),
               "elapsed_s": round(time.time() - started, 1), **res,
               "notes": ["both engines over TCP on 127.0.0.1, one Go client (database/sql), "
                         "its connections pinned and statements prepared before each run's clock",
                         "rounds alternate which engine runs first",
                         "PostgreSQL stores bigrows.c2 with its default storage (pglz compression); "
                         "extentdb stores the 8,000 characters and LZ4-compresses its log records",
                         "PostgreSQL's peak RSS is summed over its processes, counting shared "
                         "memory once per process; Pss sums share it out",
                         "the client, both servers and any other work on the machine share its cores"]}
        lib.write_results(a.family, out)
        print(f"({time.time() - started:.0f} s)")
    finally:
        if srv:
            srv.stop()
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
