#!/usr/bin/env python3
"""Backup and consistency checks: extentdb against PostgreSQL and SQLite on the same data.

Each engine holds the same logical table, N rows of (int key, two strings of 4,000 and 3,900
characters), N = --size-gb GB / 8 KB, stored without compression (PostgreSQL's columns set
to STORAGE EXTERNAL, as bench/tds.py does; SQLite and extentdb do not compress). Then, each
engine's files not in the page cache before each step:
  1. backup: extentdb `BACKUP DATABASE` sent by `extentdb sqlcmd` to a running `extentdb
     serve`, PostgreSQL `pg_basebackup` (plain format, WAL fetched, synced) against its
     running server, SQLite's online backup API into a new file (synced, in-process: SQLite
     has no server); the bytes each writes per second against `cp` of the same engine's
     files (synced) in the same run;
  2. consistency check, warm cache: extentdb `DBCC CHECKDB` (full and PHYSICAL_ONLY, MAXDOP
     1) sent by `extentdb sqlcmd` to the running server, PostgreSQL `pg_amcheck
     --heapallindexed` (heap and B-tree, one job) against its running server, SQLite
     `PRAGMA integrity_check` (in-process).
extentdb and PostgreSQL are measured the same way: a client tool over TCP on loopback asks
the running server, timed around the client command (issue 20 item 9).
Throughputs are logical GB (the rows' bytes) per second, so engines with different page
formats compare on the same work. Timed around each command. Writes
bench/results/<date>-<host>-peers.json (or into $XDB_RESULTS_DIR).

Usage: bench/peers.py [--size-gb N] [--dir PARENT] [--binary PATH]
Needs root (or an existing PostgreSQL install) to install PostgreSQL.
"""
import argparse
import datetime
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from data_path import Postgres  # noqa: E402

ROW_BYTES = 4 + 4000 + 3900


def dir_files(d):
    out = []
    for root, _, files in os.walk(d):
        out += [os.path.join(root, f) for f in files]
    return out


def du(paths):
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def timed_cmd(cmd, **kw):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return wall, p.stdout + p.stderr


def cp_tree(srcs, dst_dir):
    """cp -r of files or directories (page cache dropped first) into dst_dir, synced;
    seconds."""
    lib.drop_cache([f for s in srcs for f in (dir_files(s) if os.path.isdir(s) else [s])])
    os.makedirs(dst_dir)
    t = time.perf_counter()
    subprocess.run(["cp", "-r", *srcs, dst_dir], check=True, capture_output=True)
    subprocess.run(["sync", "-f", dst_dir], check=True)
    wall = time.perf_counter() - t
    shutil.rmtree(dst_dir)
    return wall


PASSWORD = "Peers-Bench-1"


class XdbServer:
    """`extentdb serve` on a free loopback port, and `extentdb sqlcmd` commands for it."""

    def __init__(self, binary, inst):
        import socket
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            self.port = so.getsockname()[1]
        self.binary = binary
        env = {**os.environ, "MSSQL_SA_PASSWORD": PASSWORD}
        self.proc = subprocess.Popen([binary, "serve", "--data-dir", inst, "--listen",
                                      f"127.0.0.1:{self.port}"], stdout=subprocess.PIPE,
                                     env=env, text=True)
        line = self.proc.stdout.readline()
        if "listening" not in line:
            sys.exit(f"extentdb serve did not start: {line}")

    def sqlcmd(self, query):
        return [self.binary, "sqlcmd", "-S", f"127.0.0.1,{self.port}", "-U", "sa", "-P",
                PASSWORD, "-b", "-Q", query]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--dir", default=os.path.join(lib.ROOT, "bench", "tmp"))
    ap.add_argument("--binary", default=lib.BINARY)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="peers-", dir=a.dir)
    os.chmod(work, 0o755)
    pg = None
    xdb = None
    res = {"benchmark": "peers", "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "host": lib.host(), "size_gb": a.size_gb}
    try:
        # ---- the same table in each engine
        sql, rows = lib.filled_database_sql("P", a.size_gb, int(a.size_gb * 1024 * 1.1) + 16, 256)
        logical = rows * ROW_BYTES
        res.update(rows=rows, logical_bytes=logical)
        inst = os.path.join(work, "xdb")
        subprocess.run([a.binary, "setup", "--data-dir", inst, "--tempdb-files", "1"],
                       check=True, capture_output=True)
        lib.exec_sql(a.binary, inst, sql)
        xdb_files = [os.path.join(inst, "data", "P.mdf")]

        pg = Postgres(work)
        res["postgres_version"] = pg.version
        pg.psql_c("CREATE EXTENSION IF NOT EXISTS amcheck")
        pg.psql_c("CREATE TABLE t (k int PRIMARY KEY, v text, w text)")
        pg.psql_c("ALTER TABLE t ALTER COLUMN v SET STORAGE EXTERNAL, ALTER COLUMN w SET STORAGE EXTERNAL")
        step = 16000
        for lo in range(0, rows, step):
            hi = min(rows, lo + step) - 1
            pg.psql_c(f"INSERT INTO t SELECT g, repeat((g % 10)::text, 4000), repeat('w', 3900) "
                      f"FROM generate_series({lo}, {hi}) g")
        pg.psql_c("CHECKPOINT")
        pg_files = dir_files(os.path.join(pg.data, "base"))

        sq_path = os.path.join(work, "p.sqlite")
        db = sqlite3.connect(sq_path)
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, w TEXT)")
        for lo in range(0, rows, step):
            db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                           ((k, str(k % 10) * 4000, "w" * 3900) for k in range(lo, min(rows, lo + step))))
            db.commit()
        db.close()
        counts = {
            "extentdb": int(lib.exec_sql(a.binary, inst, "SET NOCOUNT ON; SELECT COUNT(*) FROM P.dbo.t").split()[-1]),
            "postgres": int(pg.psql_c("SELECT count(*) FROM t").strip()),
            "sqlite": sqlite3.connect(sq_path).execute("SELECT count(*) FROM t").fetchone()[0],
        }
        res["row_counts"] = counts
        res["files_bytes"] = {"extentdb": du(xdb_files), "postgres": du(pg_files),
                              "sqlite": os.path.getsize(sq_path)}
        print(f"{rows} rows ({logical / 1e9:.2f} GB logical) in each engine; files "
              + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in res["files_bytes"].items()), flush=True)

        # ---- 1. backup, cold (extentdb as a server from here on, as PostgreSQL is)
        xdb = XdbServer(a.binary, inst)
        b = {}
        lib.drop_cache(xdb_files)
        wall, _ = timed_cmd(xdb.sqlcmd("BACKUP DATABASE P TO DISK = 'p.bak' WITH INIT"))
        b["extentdb"] = {"s": wall, "bytes": os.path.getsize(os.path.join(inst, "backup", "p.bak")),
                         "cp_s": cp_tree(xdb_files, os.path.join(work, "cp1")), "cp_bytes": du(xdb_files)}
        pg.psql_c("CHECKPOINT")
        lib.drop_cache(pg_files)
        target = os.path.join(work, "pgbase")
        # pg_basebackup writes as the server's OS user into a directory it can create.
        os.makedirs(target, mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(target, "postgres", "postgres")
        lib.drop_cache(pg_files)
        wall, _ = timed_cmd(pg.as_user + [f"{pg.bin}/pg_basebackup", "-h", pg.sock, "-p", str(pg.port),
                                          "-U", "postgres", "-D", target, "-Fp", "-X", "fetch"])
        b["postgres"] = {"s": wall, "bytes": du(dir_files(target)),
                         "cp_s": cp_tree([os.path.join(pg.data, "base")], os.path.join(work, "cp2")),
                         "cp_bytes": du(pg_files)}
        lib.drop_cache([sq_path])
        dst = os.path.join(work, "p-backup.sqlite")
        t = time.perf_counter()
        src = sqlite3.connect(sq_path)
        out = sqlite3.connect(dst)
        src.backup(out)
        out.close()
        src.close()
        fd = os.open(dst, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        b["sqlite"] = {"s": time.perf_counter() - t, "bytes": os.path.getsize(dst),
                       "cp_s": cp_tree([sq_path], os.path.join(work, "cp3")),
                       "cp_bytes": os.path.getsize(sq_path)}
        for e, v in b.items():
            v["logical_GBps"] = logical / v["s"] / 1e9
            # Bytes written per second against cp's bytes per second on the same files.
            v["speed_over_own_cp"] = (v["bytes"] / v["s"]) / (v["cp_bytes"] / v["cp_s"])
        res["backup"] = b

        # ---- 2. consistency checks, warm
        c = {}
        lib.dd_read(xdb_files)
        for mode, extra in (("full", ""), ("physical_only", ", PHYSICAL_ONLY")):
            check = xdb.sqlcmd(f"DBCC CHECKDB (P) WITH NO_INFOMSGS, MAXDOP = 1{extra}")
            timed_cmd(check)
            wall, _ = timed_cmd(check)
            c[f"extentdb_{mode}"] = {"s": wall}
        lib.dd_read(pg_files)
        amcheck = [f"{pg.bin}/pg_amcheck", "-h", pg.sock, "-p", str(pg.port), "-U", "postgres",
                   "-d", "postgres", "--heapallindexed", "-j", "1"]
        timed_cmd(amcheck)
        wall, _ = timed_cmd(amcheck)
        c["postgres_amcheck_heapallindexed"] = {"s": wall}
        lib.dd_read([sq_path])
        for _ in range(2):
            t = time.perf_counter()
            r = sqlite3.connect(sq_path).execute("PRAGMA integrity_check").fetchone()[0]
            wall = time.perf_counter() - t
        c["sqlite_integrity_check"] = {"s": wall, "result": r}
        for v in c.values():
            v["logical_GBps"] = logical / v["s"] / 1e9
        res["check"] = c
        for e, v in b.items():
            print(f"backup {e:9s} {v['s']:7.2f} s  {v['logical_GBps']:.2f} GB/s  "
                  f"{v['speed_over_own_cp']:.2f}x cp of its own files", flush=True)
        for e, v in c.items():
            print(f"check  {e:32s} {v['s']:7.2f} s  {v['logical_GBps']:.2f} GB/s", flush=True)
        lib.write_results("peers", res)
    finally:
        if xdb:
            xdb.stop()
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
