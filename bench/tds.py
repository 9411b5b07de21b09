#!/usr/bin/env python3
"""TDS benchmark (issue 5): round trips and 8 KB-row inserts over the wire, extentdb against
PostgreSQL, in one run on one machine.

  1. Round trips per second of a trivial query (`SELECT 1`) at 1 and 8 connections.
  2. Autocommit inserts of one 8 KB row (8,000 hex characters plus a bigint key) per
     second at 1 and 8 connections.
  3. Heap inserts (issue 4: sessions allocating at once): each connection inserts into its
     own heap, eight 8 KB rows per autocommit statement (one extent each), at 1 and 2
     connections; rows per second. extentdb's heaps are in filegroup HEAPS of two equal
     files, so their extents come by the lock-free round robin; FGCB_PRP_FILL's figures
     from sys.dm_os_spinlock_stats are reported after the runs.

extentdb: `extentdb serve` on 127.0.0.1, driven by `tds_load` (crates/tds/examples), the
TDS client extentdb's sqlcmd uses, one thread per connection. PostgreSQL: a private cluster
listening on 127.0.0.1 (fsync, synchronous_commit and full_page_writes on), driven by
pgbench with the same statements (-c connections -j 2, simple protocol), the pad column's
storage EXTERNAL so PostgreSQL does not compress it either. Both commit durably per row.
Each figure is the median of --rounds interleaved runs of --seconds each. Nothing asserts a
timing. Writes bench/results/<date>-<host>-tds.json.

Usage: bench/tds.py [--seconds S] [--rounds R] [--dir PARENT] [--quick]
"""
import argparse, datetime, json, os, platform, re, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_path import Postgres, median, run, ROOT  # noqa: E402
from lib import results_path  # noqa: E402

PASSWORD = "B3nch!Mark"
# Connections of the heap-insert runs (each its own heap).
HEAP_CONNS = (1, 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, work):
        self.binary = binary
        self.dir = os.path.join(work, "xdb")
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        env = {**os.environ, "MSSQL_SA_PASSWORD": PASSWORD}
        run([binary, "setup", "--data-dir", self.dir, "--tempdb-files", "1",
             "--sa-password", PASSWORD])
        self.proc = subprocess.Popen([binary, "serve", "--data-dir", self.dir, "--listen",
                                      self.addr], stdout=subprocess.PIPE, env=env, text=True)
        self.proc.stdout.readline()

    def sqlcmd(self, sql, db="master"):
        return run([self.binary, "sqlcmd", "-S", self.addr.replace(":", ","), "-P", PASSWORD,
                    "-d", db, "-b", "-Q", sql]).stdout

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def xdb_load(load, srv, mode, conns, seconds, key_base):
    out = run([load, srv.addr, PASSWORD, "bench", mode, str(conns), str(seconds),
               str(key_base)]).stdout
    return json.loads(out.strip().splitlines()[-1])["ops_per_s"]


def pg_load(pg, script, conns, seconds, work):
    path = os.path.join(work, "pgbench.sql")
    with open(path, "w") as f:
        f.write(script)
    os.chmod(path, 0o644)
    out = run(pg.as_user + ["pgbench", "-n", "-h", "127.0.0.1", "-p", str(pg.port), "-U",
                            "postgres", "-c", str(conns), "-j", str(min(conns, 2)), "-T",
                            str(seconds), "-f", path, "postgres"]).stdout
    m = re.search(r"tps = ([0-9.]+)", out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(ROOT, "bench", "tmp"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = 3, 1
    run(["cargo", "build", "--release", "--bin", "extentdb", "-p", "extentdb"], cwd=ROOT)
    run(["cargo", "build", "--release", "-p", "extentdb-tds", "--example", "tds_load"], cwd=ROOT)
    binary = os.path.join(ROOT, "target", "release", "extentdb")
    load = os.path.join(ROOT, "target", "release", "examples", "tds_load")
    os.makedirs(a.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tds-", dir=a.dir)
    os.chmod(work, 0o755)  # the postgres user runs initdb inside it
    srv = pg = None
    try:
        srv = Server(binary, work)
        pg = Postgres(work, tcp=True)
        srv.sqlcmd("CREATE DATABASE bench ON (NAME = bench, FILENAME = 'bench.mdf', SIZE = 2GB, "
                   "FILEGROWTH = 1GB) LOG ON (NAME = bench_log, FILENAME = 'bench_log.ldf', "
                   "SIZE = 1GB, FILEGROWTH = 512MB)")
        srv.sqlcmd("CREATE TABLE t (k bigint PRIMARY KEY, pad varchar(8000))", db="bench")
        pg.psql_c("CREATE TABLE t (k bigint PRIMARY KEY, pad varchar(8000))")
        pg.psql_c("ALTER TABLE t ALTER COLUMN pad SET STORAGE EXTERNAL")
        srv.sqlcmd("ALTER DATABASE bench ADD FILEGROUP HEAPS; "
                   + " ".join(f"ALTER DATABASE bench ADD FILE (NAME = heaps{i}, FILENAME = "
                              f"'heaps{i}.ndf', SIZE = 1GB, FILEGROWTH = 1GB) TO FILEGROUP HEAPS;"
                              for i in range(2)), db="bench")
        for i in range(HEAP_CONNS[-1]):
            srv.sqlcmd(f"CREATE TABLE h{i} (k bigint NOT NULL, pad varchar(8000)) ON HEAPS",
                       db="bench")
            pg.psql_c(f"CREATE TABLE h{i} (k bigint NOT NULL, pad varchar(8000))")
            pg.psql_c(f"ALTER TABLE h{i} ALTER COLUMN pad SET STORAGE EXTERNAL")
        # pgbench cannot name a table by client: one branch per connection.
        eight = ", ".join([f"(:k + {j}, repeat({{pad}}, 250))" for j in range(8)])
        pg_heap = "\\set k random(1, 1000000000000)\n" + "".join(
            f"\\{'if' if i == 0 else 'elif'} :client_id = {i}\n"
            f"INSERT INTO h{i} VALUES {eight};\n" for i in range(HEAP_CONNS[-1])) + "\\endif\n"
        pad = "md5(random()::text)"
        pg_heap = pg_heap.replace("{pad}", pad)
        pg_insert = ("\\set k random(1, 1000000000000)\n"
                     f"INSERT INTO t VALUES (:k, repeat({pad}, 250)) ON CONFLICT DO NOTHING;\n")
        results = {}
        key = 1
        for rnd in range(a.rounds):
            for conns in (1, 8):
                for mode in ("select", "insert"):
                    name = f"{mode}_{conns}"
                    x = xdb_load(load, srv, mode, conns, a.seconds, key)
                    key += 10 ** 11
                    p = pg_load(pg, "SELECT 1;\n" if mode == "select" else pg_insert, conns,
                                a.seconds, work)
                    results.setdefault(name, {"extentdb": [], "postgres": []})
                    results[name]["extentdb"].append(x)
                    results[name]["postgres"].append(p)
                    print(f"round {rnd + 1} {name}: extentdb {x:,.0f}/s, PostgreSQL {p:,.0f}/s",
                          flush=True)
            for conns in HEAP_CONNS:
                name = f"heap_{conns}"
                x = xdb_load(load, srv, "heap", conns, a.seconds, key)
                key += 10 ** 11
                # pgbench counts statements of eight rows.
                p = 8 * pg_load(pg, pg_heap, conns, a.seconds, work)
                results.setdefault(name, {"extentdb": [], "postgres": []})
                results[name]["extentdb"].append(x)
                results[name]["postgres"].append(p)
                print(f"round {rnd + 1} {name}: extentdb {x:,.0f} rows/s, PostgreSQL "
                      f"{p:,.0f} rows/s", flush=True)
        rows = int(re.findall(r"^\s*(\d+)\s*$",
                              srv.sqlcmd("SET NOCOUNT ON; SELECT COUNT(*) FROM t", db="bench"),
                              re.M)[-1])
        spin = srv.sqlcmd("SET NOCOUNT ON; SELECT collisions, spins, backoffs FROM "
                          "sys.dm_os_spinlock_stats WHERE name = 'FGCB_PRP_FILL'")
        fgcb = [int(v) for v in re.findall(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s*$", spin, re.M)[-1]]
        heap_rows = sum(int(re.findall(r"^\s*(\d+)\s*$", srv.sqlcmd(
            f"SET NOCOUNT ON; SELECT COUNT(*) FROM h{i}", db="bench"), re.M)[-1])
            for i in range(HEAP_CONNS[-1]))
        summary = {}
        for name, r in results.items():
            xm, pm = median(r["extentdb"]), median(r["postgres"])
            summary[name] = {"extentdb_per_s": xm, "postgres_per_s": pm,
                             "ratio_extentdb_to_postgres": xm / pm, "runs": r}
        print("\nmedians (operations per second):")
        for name, s in summary.items():
            print(f"  {name:10s} extentdb {s['extentdb_per_s']:10,.0f}  PostgreSQL "
                  f"{s['postgres_per_s']:10,.0f}  ratio {s['ratio_extentdb_to_postgres']:.2f}x")
        print(f"extentdb rows inserted and checked by COUNT(*): {rows:,} into t, "
              f"{heap_rows:,} into the heaps")
        h1, h2 = summary["heap_1"]["extentdb_per_s"], summary[f"heap_{HEAP_CONNS[-1]}"]["extentdb_per_s"]
        p1, p2 = summary["heap_1"]["postgres_per_s"], summary[f"heap_{HEAP_CONNS[-1]}"]["postgres_per_s"]
        print(f"heap inserts, {HEAP_CONNS[-1]} connections / 1: extentdb {h2 / h1:.2f}x, "
              f"PostgreSQL {p2 / p1:.2f}x; FGCB_PRP_FILL collisions, spins, backoffs: {fgcb}")
        host = platform.node() or "host"
        out = {"benchmark": "tds", "date": datetime.date.today().isoformat(), "host": host,
               "seconds_per_run": a.seconds, "rounds": a.rounds, "postgres": pg.version,
               "extentdb_rows": rows, "extentdb_heap_rows": heap_rows,
               "heap_scaling_extentdb": h2 / h1, "heap_scaling_postgres": p2 / p1,
               "fgcb_prp_fill_collisions_spins_backoffs": fgcb, "results": summary}
        path = results_path("tds")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {path}")
    finally:
        if srv:
            srv.stop()
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
