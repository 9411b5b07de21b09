#!/usr/bin/env python3
"""Data-path benchmark: inserts, log throughput and crash recovery (seed 004).

Measures, on one file system in one run, against baselines from the same run:
  1. N single-row autocommit inserts of a CHAR(8000) row (seed 004's workload):
     extentdb (`INSERT INTO BigRows DEFAULT VALUES` / `GO N`), PostgreSQL (psql running a file of
     N autocommit INSERTs over the unix socket; fsync, synchronous_commit, full_page_writes on)
     and SQLite (WAL, synchronous=FULL, one INSERT per transaction). Rows/s and ratios.
  2. N rows of the same shape in ONE transaction: extentdb WHILE loop in one batch, PostgreSQL
     INSERT ... SELECT FROM generate_series, SQLite executemany. Rows/s and ratios.
  3. Log write throughput of workload 2 (log bytes = growth of used_log_space_in_bytes from
     sys.dm_db_log_space_usage, read just before COMMIT) over the bulk insert time, against dd
     writing the same number of MB with oflag=direct conv=fdatasync.
  4. Crash recovery: a bulk load (one committed transaction, then one left open) is killed
     with SIGKILL; `extentdb exec -Q "SELECT 1"` (start-up includes recovery) is timed against the
     same command on the same instance with nothing left to recover; bytes and phase times come
     from the ERRORLOG recovery lines. Seconds per GB (10^9 bytes) of log read.
Every figure is repeated --rounds times, engines interleaved in rotating order; medians are
reported. Timings are taken inside each engine where possible (PRINT of SYSDATETIME() in
extentdb, clock_timestamp() in PostgreSQL, perf_counter around the SQLite calls), so process
and connection start-up are excluded. Nothing here asserts a timing; row counts are checked and
printed. Writes JSON to bench/results/<date>-<host>-data-path.json.

Row contents: extentdb and PostgreSQL pad CHAR(8000) DEFAULT 'a' to 8000 characters (PostgreSQL
then compresses the padded value with pglz, so it writes far fewer bytes). SQLite does not pad
CHAR(n), so the SQLite runs bind the padded 8000-character string explicitly to store the same
row.

Usage: bench/data_path.py [--rows N] [--quick] [--rounds R] [--dir PARENT] [--binary PATH]
Needs root (or an existing PostgreSQL install and a non-root user) to install PostgreSQL.
"""
import argparse, datetime, glob, json, os, platform, re, select, shutil, signal, socket
import sqlite3, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import machine_info as machine, write_results  # noqa: E402
ROW = "a".ljust(8000)
MB = 1 << 20


def run(cmd, timeout=7200, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        sys.exit(f"command failed (exit {p.returncode}): {' '.join(cmd)}\n"
                 f"--- stdout ---\n{p.stdout[-4000:]}\n--- stderr ---\n{p.stderr[-4000:]}")
    return p


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- extentdb

class Extentdb:
    def __init__(self, binary, inst):
        self.binary, self.inst = binary, inst
        run([binary, "setup", "--data-dir", inst, "--tempdb-files", "1"])

    def script(self, name, text, timeout=7200):
        path = os.path.join(os.path.dirname(self.inst), name)
        with open(path, "w") as f:
            f.write(text)
        p = run([self.binary, "exec", "--data-dir", self.inst, "-b", "-i", path], timeout=timeout,
                check=False)
        if p.returncode != 0 or re.search(r"^Msg \d+, Level 1[1-9]", p.stdout, re.M):
            sys.exit(f"extentdb failed: {self.binary} exec --data-dir {self.inst} -b -i {path}\n"
                     f"--- script (head) ---\n{text[:1500]}\n--- stdout ---\n{p.stdout[-4000:]}\n"
                     f"--- stderr ---\n{p.stderr[-4000:]}")
        return p.stdout


def tag_int(out, tag):
    m = re.findall(rf"^{tag}\s+(-?\d+)\s*$", out, re.M)
    if not m:
        sys.exit(f"no {tag} in extentdb output:\n{out[-3000:]}")
    return int(m[-1])


def tag_time(out, tag):
    m = re.findall(rf"^{tag} (\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d+)\s*$", out, re.M)
    if not m:
        sys.exit(f"no {tag} timestamp in extentdb output:\n{out[-3000:]}")
    base, frac = m[-1]
    return datetime.datetime.strptime(base, "%Y-%m-%d %H:%M:%S").timestamp() + float("0." + frac)


def stamp(tag):
    return f"PRINT '{tag} ' + CONVERT(varchar(30), SYSDATETIME(), 121);\n"


def create_db(name, n):
    data_mb = n * 8192 * 105 // 100 // MB + 64
    log_mb = n * 11000 // MB + 128
    return (f"CREATE DATABASE {name} ON (NAME={name}, FILENAME='{name}.mdf', SIZE={data_mb}MB, "
            f"FILEGROWTH=64MB) LOG ON (NAME={name}_log, FILENAME='{name}_log.ldf', SIZE={log_mb}MB, "
            f"FILEGROWTH=256MB)\nGO\nUSE {name}\nGO\nSET NOCOUNT ON;\n"
            "CREATE TABLE BigRows (c1 INT IDENTITY, c2 CHAR(8000) DEFAULT 'a');\nGO\n")


def drop_db(name):
    return f"USE master\nGO\nDROP DATABASE {name}\nGO\n"


def xdb_autocommit(x, n, r):
    db = f"W1_{r}"
    out = x.script(f"{db}.sql", create_db(db, n) + stamp("T0") + "GO\n"
                   "INSERT INTO BigRows DEFAULT VALUES;\n" f"GO {n}\n" + stamp("T1") +
                   "SELECT 'ROWS', COUNT(*) FROM BigRows;\nGO\n" + drop_db(db))
    return {"s": tag_time(out, "T1") - tag_time(out, "T0"), "rows": tag_int(out, "ROWS")}


def xdb_bulk(x, n, r):
    db = f"W2_{r}"
    used = "SELECT '{}', used_log_space_in_bytes FROM sys.dm_db_log_space_usage;\n"
    out = x.script(f"{db}.sql", create_db(db, n) + used.format("LOG0") + stamp("T0") +
                   f"BEGIN TRAN; DECLARE @i int = 0; WHILE @i < {n} BEGIN INSERT INTO BigRows "
                   "DEFAULT VALUES; SET @i += 1; END;\n" + used.format("LOG1") + "COMMIT;\n" +
                   stamp("T1") + "SELECT 'ROWS', COUNT(*) FROM BigRows;\nGO\n" + drop_db(db))
    return {"s": tag_time(out, "T1") - tag_time(out, "T0"), "rows": tag_int(out, "ROWS"),
            "log_bytes": tag_int(out, "LOG1") - tag_int(out, "LOG0")}


def xdb_recovery(binary, work, committed, open_rows, r):
    """Kill a bulk load with SIGKILL, time the next start-up (recovery) against a clean one."""
    inst = os.path.join(work, f"rec{r}")
    x = Extentdb(binary, inst)
    loop = "DECLARE @i int = 0; WHILE @i < {} BEGIN INSERT INTO BigRows DEFAULT VALUES; SET @i += 1; END;"
    path = os.path.join(work, f"rec{r}.sql")
    with open(path, "w") as f:
        f.write(create_db("R", committed + open_rows) +
                f"BEGIN TRAN; {loop.format(committed)} COMMIT;\nPRINT 'committed';\nGO\n"
                f"BEGIN TRAN; {loop.format(open_rows)}\nPRINT 'loaded';\nGO\n"
                "DECLARE @j int = 0; WHILE @j < 2000000000 SET @j += 1;\nGO\n")
    cmd = [binary, "exec", "--data-dir", inst, "-b", "-i", path]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen, buf, deadline = False, b"", time.time() + 3600
    try:
        while time.time() < deadline:
            rd, _, _ = select.select([child.stdout], [], [], 1.0)
            if rd:
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                if re.search(rb"^loaded\s*$", buf, re.M):
                    seen = True
                    break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    if not seen:
        sys.exit(f"recovery load never printed 'loaded': {' '.join(cmd)}\n{buf.decode()[-3000:]}")
    log_file = os.path.join(inst, "data", "R_log.ldf")
    errorlog = os.path.join(inst, "log", "ERRORLOG")
    before = os.path.getsize(errorlog)
    q = [binary, "exec", "--data-dir", inst, "-Q", "SELECT 1"]
    t = time.perf_counter()
    run(q)
    t_recover = time.perf_counter() - t
    with open(errorlog, errors="replace") as f:
        text = f.read()
    new = text[before:] if len(text) >= before else text
    clean = []
    for _ in range(3):
        t = time.perf_counter()
        run(q)
        clean.append(time.perf_counter() - t)
    rows = tag_int(run([binary, "exec", "--data-dir", inst, "-d", "R", "-b", "-Q",
                        "SELECT 'ROWS', COUNT(*) FROM BigRows"]).stdout, "ROWS")
    fwd = re.search(r"(\d+) transactions rolled forward in database 'R' \(\d+\): (\d+) log records "
                    r"\((\d+) bytes\)", new)
    done = re.search(r"Recovery completed for database R \(database ID \d+\) in \d+ second\(s\) "
                     r"\(analysis and redo (\d+) ms, undo (\d+) ms\.\)", new)
    back = re.search(r"(\d+) transactions rolled back in database 'R'", new)
    res = {"kill_log_file_bytes": os.path.getsize(log_file), "startup_recover_s": t_recover,
           "startup_clean_s": median(clean), "startup_clean_all_s": clean, "rows_after": rows,
           "rows_expected": committed,
           "errorlog": [l for l in new.splitlines() if "'R'" in l or "database R " in l]}
    if fwd:
        res.update(txn_rolled_forward=int(fwd.group(1)), log_records=int(fwd.group(2)),
                   log_bytes_read=int(fwd.group(3)))
    if back:
        res["txn_rolled_back"] = int(back.group(1))
    if done:
        res.update(analysis_redo_ms=int(done.group(1)), undo_ms=int(done.group(2)))
    if fwd and done and res["log_bytes_read"] > 0:
        gb = res["log_bytes_read"] / 1e9
        res["errorlog_s_per_gb"] = (res["analysis_redo_ms"] + res["undo_ms"]) / 1000 / gb
        res["wall_s_per_gb"] = (t_recover - res["startup_clean_s"]) / gb
    shutil.rmtree(inst, ignore_errors=True)
    return res


# ---------------------------------------------------------------- PostgreSQL

def pg_bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found and os.geteuid() == 0:
        print("installing PostgreSQL (apt-get)...", flush=True)
        run(["apt-get", "update"], check=False)
        run(["apt-get", "install", "-y", "postgresql"], env={**os.environ,
            "DEBIAN_FRONTEND": "noninteractive"})
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        sys.exit("PostgreSQL not found under /usr/lib/postgresql/*/bin and cannot install it "
                 "(run as root)")
    return os.path.dirname(found[-1])


class Postgres:
    def __init__(self, work, tcp=False):
        self.bin = pg_bindir()
        self.data = os.path.join(work, "pg")
        self.sock = os.path.join(work, "pgsock")
        os.makedirs(self.sock)
        os.makedirs(self.data, mode=0o700)
        self.as_user = []
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        run(self.as_user + [f"{self.bin}/initdb", "-D", self.data, "-A", "trust", "-U", "postgres",
                            "--no-sync"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"\nport = {self.port}\nlisten_addresses = '{'127.0.0.1' if tcp else ''}'\n"
                    f"unix_socket_directories = '{self.sock}'\nfsync = on\n"
                    "synchronous_commit = on\nfull_page_writes = on\n")
        run(self.as_user + [f"{self.bin}/pg_ctl", "-D", self.data, "-w", "-l",
                            os.path.join(self.data, "server.log"), "start"])
        self.version = self.psql_c("SHOW server_version").strip()

    def stop(self):
        run(self.as_user + [f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"],
            check=False)

    def psql(self, *args):
        return run([f"{self.bin}/psql", "-X", "-q", "-t", "-A", "-F", " ", "-v", "ON_ERROR_STOP=1",
                    "-h", self.sock, "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                    *args]).stdout

    def psql_c(self, sql):
        return self.psql("-c", sql)

    def reset(self):
        self.psql_c("DROP TABLE IF EXISTS bigrows")
        self.psql_c("CREATE TABLE bigrows (c1 serial, c2 char(8000) DEFAULT 'a')")
        self.psql_c("CHECKPOINT")

    def timed_file(self, path, body):
        with open(path, "w") as f:
            f.write("SELECT 'T0', extract(epoch from clock_timestamp()), "
                    "pg_current_wal_lsn() - '0/0'::pg_lsn;\n")
            f.write(body)
            f.write("SELECT 'T1', extract(epoch from clock_timestamp()), "
                    "pg_current_wal_lsn() - '0/0'::pg_lsn;\n")
        out = self.psql("-f", path)
        os.unlink(path)
        t = {m[0]: (float(m[1]), float(m[2])) for m in re.findall(r"^(T[01]) (\S+) (\S+)$", out, re.M)}
        rows = int(self.psql_c("SELECT count(*) FROM bigrows").strip())
        size = int(self.psql_c("SELECT pg_total_relation_size('bigrows')").strip())
        return {"s": t["T1"][0] - t["T0"][0], "wal_bytes": int(t["T1"][1] - t["T0"][1]),
                "rows": rows, "table_bytes": size}

    def autocommit(self, n, work):
        self.reset()
        return self.timed_file(os.path.join(work, "pg_w1.sql"),
                               "INSERT INTO bigrows DEFAULT VALUES;\n" * n)

    def bulk(self, n, work):
        self.reset()
        return self.timed_file(os.path.join(work, "pg_w2.sql"),
                               f"INSERT INTO bigrows (c2) SELECT 'a' FROM generate_series(1, {n});\n")


# ---------------------------------------------------------------- SQLite

def sqlite_open(path):
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE bigrows (c1 INTEGER PRIMARY KEY AUTOINCREMENT, "
               "c2 CHAR(8000) DEFAULT 'a')")
    return db


def sqlite_done(db, path, t):
    rows = db.execute("SELECT count(*) FROM bigrows").fetchone()[0]
    db.close()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    return {"s": t, "rows": rows, "file_bytes": size}


def sqlite_autocommit(n, work):
    path = os.path.join(work, "w1.sqlite")
    db = sqlite_open(path)
    t = time.perf_counter()
    for _ in range(n):
        db.execute("INSERT INTO bigrows (c2) VALUES (?)", (ROW,))
    return sqlite_done(db, path, time.perf_counter() - t)


def sqlite_bulk(n, work):
    path = os.path.join(work, "w2.sqlite")
    db = sqlite_open(path)
    t = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO bigrows (c2) VALUES (?)", ((ROW,) for _ in range(n)))
    db.execute("COMMIT")
    return sqlite_done(db, path, time.perf_counter() - t)


# ---------------------------------------------------------------- dd baseline

def dd(work, mb):
    path = os.path.join(work, "dd.bin")
    res = {}
    for flags in (["oflag=direct", "conv=fdatasync"], ["conv=fdatasync"]):
        t = time.perf_counter()
        p = run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mb}", *flags, "status=none"],
                check=False)
        s = time.perf_counter() - t
        if os.path.exists(path):
            os.unlink(path)
        if p.returncode == 0:
            res = {"s": s, "mb": mb, "flags": " ".join(flags), "mb_per_s": mb * MB / 1e6 / s}
            break
    if not res:
        sys.exit(f"dd failed: {p.stderr}")
    return res


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=70000)
    ap.add_argument("--quick", action="store_true", help="N=5000")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions, engines interleaved")
    ap.add_argument("--dir", default=os.path.join(ROOT, "bench", "tmp"),
                    help="parent of the scratch directory (on the file system to measure)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/extentdb"))
    ap.add_argument("--no-postgres", action="store_true",
                    help="extentdb and SQLite only (no PostgreSQL to install)")
    a = ap.parse_args()
    n = 5000 if a.quick else a.rows
    rec_committed = max(1000, n * 2 // 7)
    rec_open = rec_committed // 2
    if not os.path.exists(a.binary):
        print("building extentdb (cargo build --release --bin extentdb)...", flush=True)
        run(["cargo", "build", "--release", "--bin", "extentdb"], cwd=ROOT)
    os.makedirs(a.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="data-path-", dir=a.dir)
    os.chmod(work, 0o755)
    pg = None
    started = time.time()
    try:
        info = machine(work)
        pg = None if a.no_postgres else Postgres(work)
        x = Extentdb(a.binary, os.path.join(work, "inst"))
        w1 = {"extentdb": [], "postgres": [], "sqlite": []}
        w2 = {"extentdb": [], "postgres": [], "sqlite": []}
        dds, recs = [], []
        runs1 = {"extentdb": lambda r: xdb_autocommit(x, n, r),
                 "postgres": lambda r: pg.autocommit(n, work),
                 "sqlite": lambda r: sqlite_autocommit(n, work)}
        runs2 = {"extentdb": lambda r: xdb_bulk(x, n, r),
                 "postgres": lambda r: pg.bulk(n, work),
                 "sqlite": lambda r: sqlite_bulk(n, work)}
        engines = ["extentdb", "sqlite"] if pg is None else ["extentdb", "postgres", "sqlite"]
        for r in range(a.rounds):
            k = r % len(engines)
            order = engines[k:] + engines[:k]
            for e in order:
                w1[e].append(runs1[e](r))
                print(f"round {r + 1} autocommit {e:9s} {w1[e][-1]['s']:9.3f} s "
                      f"rows {w1[e][-1]['rows']}", flush=True)
            for e in order:
                w2[e].append(runs2[e](r))
                print(f"round {r + 1} bulk       {e:9s} {w2[e][-1]['s']:9.3f} s "
                      f"rows {w2[e][-1]['rows']}", flush=True)
                if e == "extentdb":
                    mb = max(1, round(w2[e][-1]["log_bytes"] / MB))
                    dds.append(dd(work, mb))
                    print(f"round {r + 1} dd         {mb} MB {dds[-1]['s']:9.3f} s", flush=True)
            recs.append(xdb_recovery(a.binary, work, rec_committed, rec_open, r))
            print(f"round {r + 1} recovery   {recs[-1]['startup_recover_s']:.3f} s "
                  f"(clean {recs[-1]['startup_clean_s']:.3f} s), "
                  f"{recs[-1].get('log_bytes_read')} B read", flush=True)

        def rps(runs):
            return median([n / x["s"] for x in runs])

        res = {}
        for w, runs in (("autocommit", w1), ("bulk", w2)):
            for e in engines:
                res[f"{w}_{e}_rows_per_s"] = rps(runs[e])
            if pg:
                res[f"{w}_extentdb_vs_postgres"] = res[f"{w}_extentdb_rows_per_s"] / res[f"{w}_postgres_rows_per_s"]
            res[f"{w}_extentdb_vs_sqlite"] = res[f"{w}_extentdb_rows_per_s"] / res[f"{w}_sqlite_rows_per_s"]
        res["bulk_extentdb_log_bytes"] = median([x["log_bytes"] for x in w2["extentdb"]])
        res["bulk_extentdb_log_bytes_per_row"] = res["bulk_extentdb_log_bytes"] / n
        res["bulk_extentdb_log_mb_per_s"] = median([x["log_bytes"] / 1e6 / x["s"] for x in w2["extentdb"]])
        res["dd_mb_per_s"] = median([d["mb_per_s"] for d in dds])
        res["log_vs_dd"] = res["bulk_extentdb_log_mb_per_s"] / res["dd_mb_per_s"]
        if pg:
            res["postgres_autocommit_wal_bytes_per_row"] = median([x["wal_bytes"] / n for x in w1["postgres"]])
            res["postgres_bulk_wal_bytes_per_row"] = median([x["wal_bytes"] / n for x in w2["postgres"]])
        res["recovery_log_bytes_read"] = median([r.get("log_bytes_read") for r in recs])
        res["recovery_startup_s"] = median([r["startup_recover_s"] for r in recs])
        res["recovery_clean_startup_s"] = median([r["startup_clean_s"] for r in recs])
        res["recovery_errorlog_s_per_gb"] = median([r.get("errorlog_s_per_gb") for r in recs])
        res["recovery_wall_s_per_gb"] = median([r.get("wall_s_per_gb") for r in recs])

        checks = []
        for w, runs in (("autocommit", w1), ("bulk", w2)):
            for e in engines:
                for i, x in enumerate(runs[e]):
                    checks.append((f"{w} {e} round {i + 1}", x["rows"], n))
        for i, r in enumerate(recs):
            checks.append((f"recovery round {i + 1}", r["rows_after"], r["rows_expected"]))
        counts_ok = all(got == want for _, got, want in checks)

        print(f"\nextentdb data path, N={n} rows of CHAR(8000), {a.rounds} rounds (medians), {work}")
        print(f"{'workload':34s} {'extentdb':>12s} {'PostgreSQL':>12s} {'SQLite':>12s} "
              f"{'xdb/PG':>8s} {'xdb/SQLite':>10s}")
        for w, label in (("autocommit", "1. autocommit inserts (rows/s)"),
                         ("bulk", "2. one-transaction bulk (rows/s)")):
            print(f"{label:34s} {res[f'{w}_extentdb_rows_per_s']:12.0f} "
                  f"{res.get(f'{w}_postgres_rows_per_s', float('nan')):12.0f} "
                  f"{res[f'{w}_sqlite_rows_per_s']:12.0f} "
                  f"{res.get(f'{w}_extentdb_vs_postgres', float('nan')):8.3f} "
                  f"{res[f'{w}_extentdb_vs_sqlite']:10.3f}")
        print(f"3. log write: {res['bulk_extentdb_log_bytes'] / 1e6:.1f} MB of log "
              f"({res['bulk_extentdb_log_bytes_per_row']:.0f} B/row), "
              f"{res['bulk_extentdb_log_mb_per_s']:.1f} MB/s vs dd ({dds[0]['flags']}) "
              f"{res['dd_mb_per_s']:.1f} MB/s: ratio {res['log_vs_dd']:.3f}")
        if res["recovery_errorlog_s_per_gb"] is not None:
            print(f"4. recovery: {res['recovery_log_bytes_read'] / 1e6:.1f} MB of log read; start-up "
                  f"{res['recovery_startup_s']:.3f} s vs {res['recovery_clean_startup_s']:.3f} s clean; "
                  f"{res['recovery_errorlog_s_per_gb']:.2f} s/GB (ERRORLOG redo+undo), "
                  f"{res['recovery_wall_s_per_gb']:.2f} s/GB (wall-clock difference)")
        else:
            print("4. recovery: ERRORLOG recovery lines not found:\n  " +
                  "\n  ".join(recs[-1]["errorlog"]))
        if pg:
            print(f"context: PostgreSQL WAL per row {res['postgres_autocommit_wal_bytes_per_row']:.0f} B "
                  f"(autocommit), {res['postgres_bulk_wal_bytes_per_row']:.0f} B (bulk); "
                  f"PG table {w2['postgres'][-1]['table_bytes'] / 1e6:.1f} MB (pglz-compressed rows)")
        print("row counts: " + ("all correct" if counts_ok else "MISMATCH"))
        for name, got, want in checks:
            print(f"  {name:32s} {got:8d} {'ok' if got == want else f'EXPECTED {want}'}")

        result = {"benchmark": "data-path", "date": datetime.datetime.now().isoformat(timespec="seconds"),
                  "host": socket.gethostname(), "rows": n, "rounds": a.rounds, "quick": a.quick,
                  "dir": os.path.relpath(work, ROOT), "machine": info, "postgres_version": pg.version if pg else None,
                  "elapsed_s": time.time() - started, **res, "row_counts_ok": counts_ok,
                  "runs": {"autocommit": w1, "bulk": w2, "dd": dds, "recovery": recs},
                  "recovery_load": {"committed_rows": rec_committed, "open_rows": rec_open},
                  "notes": ["medians over rounds; engines interleaved in rotating order",
                            "PostgreSQL compresses the padded char(8000) value (pglz)",
                            "SQLite binds the 8000-char padded value (SQLite does not pad CHAR)",
                            "GB = 10^9 bytes, MB/s = 10^6 bytes/s"]}
        write_results("data-path", result)
        print(f"({time.time() - started:.0f} s)")
    finally:
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
