#!/usr/bin/env python3
"""Memory benchmark (issue 20, item 3): the server's peak RSS against its memory cap.

One instance is set up with `--max-server-memory-mb CAP` and loaded offline (`extentdb exec`)
with two tables much larger than CAP: `big`, a heap, and `bigc`, clustered on its key, each
of rows (id BIGINT, pad CHAR(2000)), four rows to a page. Then `extentdb serve` answers
over TDS and these cases run one after the other, each on its own connection(s) (pytds):

  scan         SELECT COUNT(*) FROM big
  agg_max      SELECT MAX(pad) FROM big
  agg_sum      SELECT COUNT(*), SUM(id) FROM big
  clustered    SELECT COUNT(*) FROM bigc
  slow_client  SELECT id, pad FROM big, read by a client whose socket is throttled to
               --slow-rate MB/s (receive buffer 256 KiB) for the first --slow-seconds, then
               drained at full speed: a streaming server waits on the client with bounded
               buffers; one that materializes its result (or queues it unboundedly for the
               socket) shows the whole result in its RSS during the slow phase
  checkdb      DBCC CHECKDB (mem) WITH NO_INFOMSGS
  big_batches  --batch-conns connections each send one SQL batch of --batch-mb MB on the wire
               (UTF-16, the size `serve --max-request-mb` limits) at once:
               SELECT LEN('xxx...'); an error (e.g. a refused oversized batch) is a valid
               outcome and its message number is recorded
  count_distinct
               SELECT COUNT(DISTINCT CONCAT(id, pad)) FROM big: a distinct value of 2 KB per
               row, every one different, through the aggregate's spilling sort; the count
               checked against the rows
  update_all   UPDATE big SET id = id + 1: every row of the heap changed in one statement
               (its matches spooled, then applied a window at a time); @@ROWCOUNT checked

For each case: the server's RSS just before it (baseline, read once the RSS has settled, so
memory the previous case frees late is not counted), its peak RSS during it (VmHWM of
/proc/PID/status after resetting it through /proc/PID/clear_refs before the case; VmRSS is
also sampled every 50 ms as a cross-check), wall time, rows and bytes the client received,
and whether it succeeded. Past --rss-ceiling-mib (default 60% of MemAvailable) the server is
killed, so as not to exhaust a shared machine: the case is recorded as killed at the ceiling
and the server started again for the next case. The rule the cases are held to:

    ratio = peak_rss_mib / (1.5 * CAP + ALLOWANCE_MIB * connections);  held = ratio <= 1

Every case is gated (UNGATED is empty). update_all was not while the storage layer's open
transaction kept each change's undo action (for an UPDATE the row's old record) in memory
until it ended; it keeps at most UNDO_MEMORY_BYTES (4 MiB, storage/src/xact.rs invariant
2) and reads the rest back from the log at rollback. What the SQL layer holds for it (two
spools and a window) is within the rule. It runs last.

Nothing here fails on a ratio: bench/report.py records the ratios and gates them only when
its MEMORY_GATES is on. Writes bench/results/<date>-<host>-memory.json (or into
$XDB_RESULTS_DIR; with --quick into bench/tmp/quick/ unless XDB_RESULTS_DIR is set).

A case still running after --case-timeout-s (default 1800) is ended by the client (its
connection closed) and recorded as failed with the peak RSS it reached.

Usage: bench/memory.py [--cap-mb 256] [--table-mb 2400] [--only case,...] [--dir PARENT]
                       [--binary PATH] [--rss-ceiling-mib N] [--case-timeout-s S] [--keep]
                       [--quick]
--quick: CAP 64, tables of 4 x CAP, 10 s of slow reading, 8 x 10 MB batches.
Needs python-tds (PyPI `python-tds`, which scripts/test.sh installs).
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

# The per-connection allowance of the memory rule: a server started with a cap of CAP MiB may
# peak at 1.5 * CAP + ALLOWANCE_MIB per open client connection. docs/BENCHMARKS.md (and any
# doc that states the server's memory rule) must state the same figure.
ALLOWANCE_MIB = 16
HEADROOM = 1.5
PASSWORD = "B3nch!Mark"
DB = "mem"
PAD = 2000          # CHAR(PAD): rows of id BIGINT + pad take 2,017 bytes, four to a page
ROWS_PER_PAGE = 4
SOURCE_ROWS = 16000  # rows of the source table each INSERT ... SELECT copies at most
CASES = ["scan", "agg_max", "agg_sum", "clustered", "slow_client", "checkdb", "big_batches",
         "count_distinct", "update_all"]
# Cases whose ratio is recorded but not gated, and why (see the docstring): none.
UNGATED = {}
# The case timeout (--case-timeout-s) as the client's request timeout.
CASE_TIMEOUT_S = [1800]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- The server's memory ----

def proc_status(pid):
    """VmRSS and VmHWM of process `pid`, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(("VmRSS:", "VmHWM:")):
                out[ln.split(":")[0]] = int(ln.split()[1])
    return out


def reset_peak(pid):
    """Resets VmHWM to the current RSS (Linux: 5 written to clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


class RssSampler:
    """Samples VmRSS every `period` seconds on a thread; keeps the maximum and when it was.
    Past `ceiling_kb` it kills the server (SIGKILL to its pid): a benchmark must not exhaust
    a shared machine's memory; the case is then recorded as killed at the ceiling."""

    def __init__(self, pid, ceiling_kb, period=0.05):
        self.pid, self.ceiling_kb, self.period = pid, ceiling_kb, period
        self.max_kb, self.max_at, self.samples = 0, 0.0, 0
        self.killed_hwm_kb = None
        self.stop_ev = threading.Event()
        self.t0 = time.perf_counter()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_ev.is_set():
            try:
                st = proc_status(self.pid)
                kb = st["VmRSS"]
            except (OSError, KeyError):
                return
            self.samples += 1
            if kb > self.max_kb:
                self.max_kb, self.max_at = kb, time.perf_counter() - self.t0
            if kb > self.ceiling_kb:
                self.killed_hwm_kb = st["VmHWM"]
                os.kill(self.pid, signal.SIGKILL)
                return
            self.stop_ev.wait(self.period)

    def rss_now_kb(self):
        return proc_status(self.pid)["VmRSS"]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.thread.join()


def settle(pid, timeout=15.0):
    """Waits until the server's RSS stops moving (two samples 250 ms apart within 2 MiB,
    twice in a row), so that memory a previous case frees late is not counted in the next
    one's baseline; returns the seconds waited."""
    t0 = time.perf_counter()
    prev, calm = proc_status(pid)["VmRSS"], 0
    while time.perf_counter() - t0 < timeout:
        time.sleep(0.25)
        cur = proc_status(pid)["VmRSS"]
        calm = calm + 1 if abs(cur - prev) < 2048 else 0
        prev = cur
        if calm >= 2:
            break
    return time.perf_counter() - t0


# ---- The client: pytds over a socket that counts (and can throttle) what it receives ----

class MeteredSocket:
    """A TCP socket for pytds (`connect(sock=...)`) that counts the bytes it receives and,
    while `rate` is set (bytes per second), receives no faster than that: the server sees a
    slow reader. The kernel's receive buffer is made small so it does not soak the result."""

    def __init__(self, port, rcvbuf=None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", port))
        self._s = s
        self.received = 0
        self.rate = None
        self._t0 = None
        self._budget0 = 0

    def throttle(self, rate):
        self.rate, self._t0, self._budget0 = rate, time.perf_counter(), self.received

    def _wait(self, want):
        if not self.rate:
            return want
        # At most what the rate allows since throttle() was called, and at most 64 KiB.
        want = min(want, 64 << 10)
        while True:
            allowed = self._budget0 + self.rate * (time.perf_counter() - self._t0) - self.received
            if allowed >= min(want, 4096):
                return int(min(want, allowed))
            time.sleep(0.005)

    def recv(self, n, *flags):
        b = self._s.recv(self._wait(n), *flags)
        self.received += len(b)
        return b

    def recv_into(self, buf, nbytes=0, *flags):
        n = self._wait(nbytes or len(buf))
        got = self._s.recv_into(buf, n, *flags)
        self.received += got
        return got

    def __getattr__(self, name):
        return getattr(self._s, name)


def connect(port, database=DB, rcvbuf=None):
    import pytds
    sock = MeteredSocket(port, rcvbuf)
    conn = pytds.connect(server="127.0.0.1", port=port, user="sa", password=PASSWORD,
                         database=database, autocommit=True, login_timeout=30,
                         timeout=CASE_TIMEOUT_S[0],
                         sock=sock)
    return conn, sock


def error_info(e):
    return {"error": str(e)[:500], "error_number": getattr(e, "number", None)}


# ---- The instance ----

def load_sql(rows):
    """Builds `big` (heap) and `bigc` (clustered) of `rows` rows each from a source table of
    at most SOURCE_ROWS rows, in INSERT ... SELECT statements of at most SOURCE_ROWS rows,
    checkpointing as it goes (SIMPLE recovery keeps the log small)."""
    src = min(rows, SOURCE_ROWS)
    seed = min(src, 1000)
    return (
        f"USE {DB}; SET NOCOUNT ON; "
        f"CREATE TABLE src (id bigint NOT NULL, pad char({PAD}) NOT NULL); "
        f"DECLARE @i int = 0; WHILE @i < {seed} BEGIN "
        f"INSERT INTO src VALUES (@i, REPLICATE(CAST(@i % 10 AS varchar(1)), {PAD})); SET @i += 1; END; "
        f"WHILE @i < {src} BEGIN "
        f"DECLARE @c int = CASE WHEN @i < {src} - @i THEN @i ELSE {src} - @i END; "
        "INSERT INTO src SELECT id + @i, pad FROM src WHERE id < @c; SET @i += @c; END; "
        f"CREATE TABLE big (id bigint NOT NULL, pad char({PAD}) NOT NULL); "
        f"CREATE TABLE bigc (id bigint PRIMARY KEY, pad char({PAD}) NOT NULL); "
        f"DECLARE @n int = 0; WHILE @n < {rows} BEGIN "
        f"DECLARE @m int = CASE WHEN {rows} - @n < {src} THEN {rows} - @n ELSE {src} END; "
        "INSERT INTO big SELECT id + @n, pad FROM src WHERE id < @m; "
        "INSERT INTO bigc SELECT id + @n, pad FROM src WHERE id < @m; "
        "SET @n += @m; CHECKPOINT; END; "
        "DROP TABLE src; CHECKPOINT; "
        "SELECT COUNT(*) FROM big; SELECT COUNT(*) FROM bigc;"
    )


class Instance:
    def __init__(self, binary, work, cap_mb):
        self.binary, self.cap_mb = binary, cap_mb
        self.dir = os.path.join(work, "inst")
        self.port = free_port()
        self.setup_flags = ["--tempdb-files", "1", "--max-server-memory-mb", str(cap_mb)]
        self.serve_flags = ["--listen", f"127.0.0.1:{self.port}"]
        self.proc = None
        p = subprocess.run([binary, "setup", "--data-dir", self.dir, "--sa-password", PASSWORD,
                            *self.setup_flags], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"extentdb setup failed:\n{p.stdout}\n{p.stderr}")

    def load(self, rows):
        data_mb = int(2 * rows / ROWS_PER_PAGE * 8192 / 2**20 * 1.15) + 64
        create = (f"CREATE DATABASE {DB} ON (NAME = {DB}, FILENAME = '{DB}.mdf', "
                  f"SIZE = {data_mb}MB, FILEGROWTH = 256MB) LOG ON (NAME = {DB}_log, "
                  f"FILENAME = '{DB}_log.ldf', SIZE = 512MB, FILEGROWTH = 256MB); "
                  f"ALTER DATABASE {DB} SET RECOVERY SIMPLE;")
        out = lib.exec_sql(self.binary, self.dir, create + " " + load_sql(rows))
        return out

    def start(self):
        env = {**os.environ, "MSSQL_SA_PASSWORD": PASSWORD}
        self.proc = subprocess.Popen([self.binary, "serve", "--data-dir", self.dir,
                                      *self.serve_flags], stdout=subprocess.PIPE, env=env,
                                     text=True)
        line = self.proc.stdout.readline()
        if "listening" not in line:
            sys.exit(f"extentdb serve did not start: {line}")
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- The cases: each returns {rows, bytes, ...} or raises ----

def one_query(port, sql):
    conn, sock = connect(port)
    try:
        cur = conn.cursor()
        before = sock.received
        cur.execute(sql)
        rows = cur.fetchall() if cur.description else []
        while cur.nextset():
            rows += cur.fetchall() if cur.description else []
        return {"rows": len(rows), "bytes": sock.received - before,
                "result": [list(map(lambda v: v if isinstance(v, (int, float)) or v is None
                                    else f"<{type(v).__name__} of {len(v)}>", r))
                           for r in rows[:3]]}
    finally:
        conn.close()


UPDATE_ALL = "UPDATE big SET id = id + 1; SELECT @@ROWCOUNT"
COUNT_DISTINCT = "SELECT COUNT(DISTINCT CONCAT(id, pad)) FROM big"


def case_slow_client(port, rate, slow_seconds, rss):
    conn, sock = connect(port, rcvbuf=256 << 10)
    try:
        cur = conn.cursor()
        before = sock.received
        t0 = time.perf_counter()
        sock.throttle(rate)
        cur.execute("SELECT id, pad FROM big")
        rows, slow_rows, slow_bytes, rss_end_slow = 0, None, None, None
        while True:
            if slow_rows is None and time.perf_counter() - t0 >= slow_seconds:
                slow_rows, slow_bytes = rows, sock.received - before
                rss_end_slow = rss.rss_now_kb()
                sock.throttle(None)
            batch = cur.fetchmany(100)
            if not batch:
                break
            rows += len(batch)
        t = time.perf_counter() - t0
        if slow_rows is None:
            slow_rows, slow_bytes = rows, sock.received - before
        return {"rows": rows, "bytes": sock.received - before,
                "slow_phase_s": min(slow_seconds, t), "slow_phase_rows": slow_rows,
                "slow_phase_bytes": slow_bytes,
                "slow_phase_MBps": slow_bytes / min(slow_seconds, t) / 1e6,
                "rss_at_end_of_slow_phase_mib": rss_end_slow / 1024 if rss_end_slow else None}
    finally:
        conn.close()


def case_big_batches(port, conns, batch_bytes):
    """`conns` connections, logged in first, each send one batch of `batch_bytes` bytes of
    UTF-16 at once: SELECT LEN('xxx...')."""
    chars = batch_bytes // 2
    head, tail = "SELECT LEN('", "')"
    sql = head + "x" * (chars - len(head) - len(tail)) + tail
    literal = chars - len(head) - len(tail)
    opened = [connect(port) for _ in range(conns)]
    results = [None] * conns
    barrier = threading.Barrier(conns)

    def worker(i):
        conn, sock = opened[i]
        before = sock.received
        barrier.wait()
        t = time.perf_counter()
        try:
            cur = conn.cursor()
            cur.execute(sql)
            r = cur.fetchall()
            results[i] = {"ok": r == [(literal,)], "result": [list(x) for x in r],
                          "bytes": sock.received - before, "s": time.perf_counter() - t}
        except Exception as e:  # noqa: BLE001 (the server's refusal is an outcome)
            results[i] = {"ok": False, "s": time.perf_counter() - t, **error_info(e)}

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(conns)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        for conn, _ in opened:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 (a refused connection may be closed already)
                pass
    ok = [r for r in results if r["ok"]]
    errs = sorted({r.get("error_number") for r in results if not r["ok"]}, key=str)
    return {"rows": sum(len(r.get("result", [])) for r in ok),
            "bytes": sum(r.get("bytes", 0) for r in ok), "batch_bytes": 2 * chars,
            "succeeded_connections": len(ok), "error_numbers": errs, "per_connection": results,
            "all_ok": len(ok) == conns,
            "error": None if len(ok) == conns else
            next((r.get("error") for r in results if not r["ok"]), None)}


def measure(pid, name, sql, connections, fn, ceiling_kb):
    """Runs `fn(sampler)` with the server's peak RSS reset before it (after its RSS has
    settled); returns the case's record."""
    settled_s = settle(pid)
    base_kb = proc_status(pid)["VmRSS"]
    reset_peak(pid)
    rec = {"case": name, "sql": sql, "connections": connections,
           "baseline_rss_mib": base_kb / 1024, "settle_s": round(settled_s, 2)}
    with RssSampler(pid, ceiling_kb) as s:
        t = time.perf_counter()
        try:
            out = fn(s)
            rec["ok"] = out.pop("all_ok", True)
            rec.update(out)
        except Exception as e:  # noqa: BLE001 (a failed case is reported)
            rec["ok"] = False
            rec.update(error_info(e))
        rec["wall_s"] = time.perf_counter() - t
    rec["killed_at_ceiling"] = s.killed_hwm_kb is not None
    if rec["killed_at_ceiling"]:
        # Not a peak: the least it would have been.
        rec["ok"] = False
        rec["peak_rss_mib"] = max(s.killed_hwm_kb, s.max_kb) / 1024
        rec["rss_after_mib"] = None
    else:
        st = proc_status(pid)
        rec["peak_rss_mib"] = st["VmHWM"] / 1024
        rec["rss_after_mib"] = st["VmRSS"] / 1024
    rec["sampled_max_rss_mib"] = s.max_kb / 1024
    rec["sampled_max_at_s"] = round(s.max_at, 2)
    return rec


def fmt_bytes(n):
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} B"


def fmt_table(cases, cap):
    lines = ["| case | conns | ok | wall | rows | bytes | baseline RSS | peak RSS (VmHWM) | "
             "sampled max | limit | ratio | held |", "|" + "---|" * 12]
    for c in cases:
        lines.append(
            f"| {c['case']} | {c['connections']} | {'yes' if c['ok'] else 'NO'} | "
            f"{c['wall_s']:.1f} s | {c.get('rows', '-')} | {fmt_bytes(c.get('bytes', 0))} | "
            f"{c['baseline_rss_mib']:,.0f} MiB | {'>= ' if c['killed_at_ceiling'] else ''}"
            f"{c['peak_rss_mib']:,.0f} MiB | "
            f"{c['sampled_max_rss_mib']:,.0f} MiB | {c['limit_mib']:,.0f} MiB | "
            f"{c['ratio']:.2f} | {'yes' if c['held'] else 'NO'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cap-mb", type=int, default=256, help="--max-server-memory-mb")
    ap.add_argument("--table-mb", type=int, default=2400, help="size of each table's pages")
    ap.add_argument("--slow-rate", type=float, default=4.0, help="MB/s the slow client reads")
    ap.add_argument("--slow-seconds", type=float, default=60.0)
    ap.add_argument("--batch-mb", type=int, default=50)
    ap.add_argument("--batch-conns", type=int, default=8)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--dir", default=os.path.join(lib.ROOT, "bench", "tmp"))
    ap.add_argument("--binary", default=lib.BINARY)
    ap.add_argument("--keep", action="store_true", help="keep the instance's directory")
    ap.add_argument("--rss-ceiling-mib", type=int, default=None,
                    help="kill the server past this RSS (default 60%% of MemAvailable)")
    ap.add_argument("--case-timeout-s", type=int, default=1800,
                    help="a case running longer fails (its connection closed)")
    ap.add_argument("--quick", action="store_true",
                    help="CAP 64, tables of 4 x CAP, 10 s slow phase, 8 x 10 MB batches")
    a = ap.parse_args()
    CASE_TIMEOUT_S[0] = a.case_timeout_s
    if a.quick:
        a.cap_mb, a.table_mb, a.slow_seconds, a.batch_mb = 64, 256, 10.0, 10
    only = [x for x in a.only.split(",") if x]
    for x in only:
        if x not in CASES:
            sys.exit(f"unknown case {x}; cases: {', '.join(CASES)}")
    if a.quick and not os.environ.get("XDB_RESULTS_DIR"):
        os.environ["XDB_RESULTS_DIR"] = os.path.join(lib.ROOT, "bench", "tmp", "quick")
    try:
        import pytds  # noqa: F401
    except ImportError:
        sys.exit("bench/memory.py needs python-tds: pip install python-tds (scripts/test.sh does)")
    started = time.time()
    if not os.path.exists(a.binary):
        subprocess.run(["cargo", "build", "--release", "--bin", "extentdb"], cwd=lib.ROOT,
                       check=True)
    os.makedirs(a.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="memory-", dir=a.dir)
    rows = int(a.table_mb * 2**20 / 8192 * ROWS_PER_PAGE)
    inst = None
    try:
        inst = Instance(a.binary, work, a.cap_mb)
        log(f"loading {rows:,} rows into big (heap) and bigc (clustered), "
            f"{a.table_mb} MB each, CAP {a.cap_mb} MB")
        t = time.perf_counter()
        out = inst.load(rows)
        load_s = time.perf_counter() - t
        counts = [int(x) for x in out.split() if x.isdigit()]
        if counts[-2:] != [rows, rows]:
            sys.exit(f"load counted {counts[-2:]}, expected {rows} each:\n{out[-2000:]}")
        data_bytes = os.path.getsize(os.path.join(inst.dir, "data", f"{DB}.mdf"))
        log(f"  loaded in {load_s:.0f} s; data file {data_bytes / 2**20:,.0f} MiB")
        if a.rss_ceiling_mib is None:
            with open("/proc/meminfo") as f:
                avail = next(int(x.split()[1]) for x in f if x.startswith("MemAvailable"))
            a.rss_ceiling_mib = int(avail * 0.6 / 1024)
        ceiling_kb = a.rss_ceiling_mib * 1024
        pid = inst.start()
        port = inst.port
        settle(pid)
        idle_kb = proc_status(pid)["VmRSS"]
        log(f"  serving; idle RSS {idle_kb / 1024:,.0f} MiB; safety ceiling "
            f"{a.rss_ceiling_mib:,} MiB")
        rate = a.slow_rate * 1e6
        batch_bytes = a.batch_mb * 10**6
        specs = {
            "scan": ("SELECT COUNT(*) FROM big", 1, lambda s: one_query(port, "SELECT COUNT(*) FROM big")),
            "agg_max": ("SELECT MAX(pad) FROM big", 1, lambda s: one_query(port, "SELECT MAX(pad) FROM big")),
            "agg_sum": ("SELECT COUNT(*), SUM(id) FROM big", 1,
                        lambda s: one_query(port, "SELECT COUNT(*), SUM(id) FROM big")),
            "clustered": ("SELECT COUNT(*) FROM bigc", 1, lambda s: one_query(port, "SELECT COUNT(*) FROM bigc")),
            "slow_client": ("SELECT id, pad FROM big", 1,
                            lambda s: case_slow_client(port, rate, a.slow_seconds, s)),
            "checkdb": (f"DBCC CHECKDB ({DB}) WITH NO_INFOMSGS", 1,
                        lambda s: one_query(port, f"DBCC CHECKDB ({DB}) WITH NO_INFOMSGS")),
            "big_batches": (f"SELECT LEN('x...') of {a.batch_mb} MB, on each of "
                            f"{a.batch_conns} connections at once", a.batch_conns,
                            lambda s: case_big_batches(port, a.batch_conns, batch_bytes)),
            "update_all": (UPDATE_ALL, 1, lambda s: one_query(port, UPDATE_ALL)),
            "count_distinct": (COUNT_DISTINCT, 1, lambda s: one_query(port, COUNT_DISTINCT)),
        }
        cases = []
        for name in CASES:
            if name not in only:
                continue
            sql, conns, fn = specs[name]
            log(f"{name}: {sql}")
            rec = measure(pid, name, sql, conns, fn, ceiling_kb)
            rec["limit_mib"] = HEADROOM * a.cap_mb + ALLOWANCE_MIB * conns
            rec["gated"] = name not in UNGATED
            if not rec["gated"]:
                rec["not_gated_because"] = UNGATED[name]
            rec["ratio"] = rec["peak_rss_mib"] / rec["limit_mib"]
            rec["held"] = rec["ratio"] <= 1
            if name in ("scan", "clustered", "agg_sum", "update_all", "count_distinct") \
                    and rec["ok"]:
                rec["rows_checked"] = rec["result"][0][0] == rows
                rec["ok"] = rec["rows_checked"]
            if rec["killed_at_ceiling"]:
                inst.proc.wait()
            rec["server_alive_after"] = inst.proc.poll() is None
            # A refused oversized batch (the server's message, its number recorded) is a
            # valid outcome; a dropped connection without one, or a dead server, is not.
            refused = name == "big_batches" and not rec["ok"] and all(
                r["ok"] or r.get("error_number") for r in rec.get("per_connection", []))
            rec["acceptable"] = (rec["ok"] or refused) and rec["server_alive_after"]
            cases.append(rec)
            log(f"  {'ok' if rec['ok'] else 'FAILED: ' + str(rec.get('error'))[:300]}; "
                f"{rec['wall_s']:.1f} s; RSS {rec['baseline_rss_mib']:,.0f} -> peak "
                f"{rec['peak_rss_mib']:,.0f} MiB (sampled {rec['sampled_max_rss_mib']:,.0f}); "
                f"limit {rec['limit_mib']:,.0f} MiB: ratio {rec['ratio']:.2f}")
            if not rec["server_alive_after"]:
                log(f"  the server {'was killed at the safety ceiling' if rec['killed_at_ceiling'] else 'exited'} "
                    f"(code {inst.proc.returncode}); started again for the next case")
                pid = inst.start()
                rec["server_restarted_after"] = True
        print("\n" + fmt_table(cases, a.cap_mb))
        held = sum(c["held"] for c in cases)
        print(f"\n{held} of {len(cases)} cases held peak RSS <= {HEADROOM} x {a.cap_mb} MiB + "
              f"{ALLOWANCE_MIB} MiB per connection")
        res = {"benchmark": "memory", "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
               "host": lib.host(), "quick": a.quick, "machine": lib.machine_info(work),
               "command": lib.command_line("bench/memory.py"),
               "cap_mib": a.cap_mb, "headroom_factor": HEADROOM,
               "idle_rss_after_start_mib": idle_kb / 1024, "rss_ceiling_mib": a.rss_ceiling_mib,
               "allowance_mib_per_connection": ALLOWANCE_MIB,
               "server_flags": {"setup": inst.setup_flags, "serve": inst.serve_flags[:1] + ["127.0.0.1:PORT"]},
               "tables": {"rows_each": rows, "row": f"id BIGINT, pad CHAR({PAD})",
                          "pages_each_mib": a.table_mb, "data_file_size_mib": data_bytes / 2**20,
                          "load_s": load_s},
               "slow_client": {"rate_MBps": a.slow_rate, "slow_seconds": a.slow_seconds,
                               "client_rcvbuf_kib": 256},
               "batches": {"connections": a.batch_conns, "bytes_each": batch_bytes},
               "cases_held": held, "cases": cases,
               "elapsed_s": round(time.time() - started, 1)}
        lib.write_results("memory", res)
    finally:
        if inst:
            inst.stop()
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
