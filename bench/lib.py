"""Helpers shared by the benchmark scripts in bench/ (no benchmark of its own).

Results go to bench/results/<date>-<host>-<name>.json, or to the directory named by the
environment variable XDB_RESULTS_DIR (bench/report.py points it at its own run's folder so
that a quick run never overwrites the full figures).
"""

import datetime
import os
import platform
import re
import socket
import sqlite3
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target/release/extentdb")
GB = 1 << 30


def host():
    return socket.gethostname().split(".")[0]


def machine_info(work):
    """What the figures were measured on: CPU, kernel, the scratch file system, versions."""
    def sh(c):
        return subprocess.run(c, capture_output=True, text=True).stdout.strip()
    with open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    with open("/proc/meminfo") as f:
        mem_kb = next((int(ln.split()[1]) for ln in f if ln.startswith("MemTotal")), 0)
    return {"uname": sh(["uname", "-a"]), "nproc": os.cpu_count(), "cpu": cpu,
            "mem_gib": round(mem_kb / 1048576, 1), "df": sh(["df", "-T", work]),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "extentdb_commit": sh(["git", "-C", ROOT, "rev-parse", "HEAD"]),
            "extentdb_tree_dirty": bool(sh(["git", "-C", ROOT, "status", "--porcelain"]))}


def command_line(script):
    """The command that ran `script` (bench/NAME.py), as the results record it: a path
    argument inside the repository relative to it, one outside it by its last part only,
    so no machine's directories are written into bench/results/."""
    def portable(arg):
        if not os.path.isabs(arg):
            return arg
        rel = os.path.relpath(arg, ROOT)
        return rel if not rel.startswith("..") else "<" + os.path.basename(arg) + ">"
    return " ".join(["python3", script] + [portable(a) for a in sys.argv[1:]])


def results_path(name):
    """Where a benchmark named `name` writes its JSON (directory created)."""
    out = os.environ.get("XDB_RESULTS_DIR") or os.path.join(ROOT, "bench", "results")
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, f"{datetime.date.today().isoformat()}-{host()}-{name}.json")


def write_results(name, result):
    """Writes a benchmark's JSON where `results_path` says, prints the path, returns it."""
    import json
    path = results_path(name)
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {path}", flush=True)
    return path


def median(xs):
    """The median (the upper one of an even count)."""
    xs = sorted(xs)
    return xs[len(xs) // 2]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def drop_cache(paths):
    """Drops the files' pages from the page cache (after writing back everything dirty)."""
    os.sync()
    for p in paths:
        if not os.path.exists(p):
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def dd_read(paths):
    """Reads the files sequentially with dd (bs=1M); returns (bytes, seconds)."""
    total = 0
    t = time.perf_counter()
    for p in paths:
        subprocess.run(["dd", f"if={p}", "of=/dev/null", "bs=1M", "status=none"], check=True)
        total += os.path.getsize(p)
    return total, time.perf_counter() - t


def dd_zero(path, size_bytes):
    """Writes `size_bytes` of zeros to a new file with dd (8 MiB blocks, conv=fdatasync)."""
    mib8 = 8 << 20
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=8M",
                    f"count={max(1, size_bytes // mib8)}", "conv=fdatasync", "status=none"],
                   check=True)


def fallocate_fsync(path, size_bytes):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, size_bytes)
        os.fsync(fd)
    finally:
        os.close(fd)


def cp_time(src, dst):
    """Seconds for `cp` of src to dst, written back (sync) before the clock stops."""
    t = time.perf_counter()
    subprocess.run(["cp", src, dst], check=True)
    subprocess.run(["sync", "-f", dst], check=True)
    return time.perf_counter() - t


def exec_sql(binary, inst, sql, flags=(), check=True):
    """Runs `sql` with `extentdb exec -b` on the instance in `inst`; returns stdout."""
    args = [binary, "exec", "--data-dir", inst, "-b"]
    for f in flags:
        args += ["-T", str(f)]
    p = subprocess.run(args + ["-Q", sql], capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"extentdb failed on: {sql[:300]}\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def timed_sql(binary, inst, body, flags=()):
    """Seconds `body` takes inside the engine (DATEDIFF over SYSDATETIME, as seed 001's
    script measures), so process start-up is excluded."""
    out = exec_sql(binary, inst, f"DECLARE @t DATETIME2 = SYSDATETIME(); {body}; "
                   "SELECT DATEDIFF(MICROSECOND, @t, SYSDATETIME())", flags)
    nums = [int(x) for x in re.findall(r"^\s*(\d+)\s*$", out, re.M)]
    if not nums:
        sys.exit(f"no timing in output:\n{out}")
    return nums[-1] / 1e6


def filled_database_sql(db, data_gb, file_mb, log_mb, files=1):
    """SQL that creates database `db` (data `file_mb` MB in `files` files of equal size,
    proportional fill spreading the table over them, log `log_mb` MB, SIMPLE recovery)
    holding about `data_gb` GB: a clustered table t of rows of 7.9 KB (one row per page). A source table of at most 16,000 such rows is built first, by doubling, and t is
    filled from it in statements of 16,000 rows, so each statement reads only the source
    (extentdb has no index seek yet: a filter on the key scans the table). Ends with a
    CHECKPOINT. Returns (sql, the number of rows in t)."""
    rows = max(1, int(data_gb * (1 << 30) / 8192))
    src = min(rows, 16000)
    each = file_mb // files + 8
    more = "".join(f", (NAME = {db}_{i}, FILENAME = '{db}_{i}.ndf', SIZE = {each}MB)"
                   for i in range(2, files + 1))
    first = file_mb if files == 1 else each
    return (
        f"CREATE DATABASE {db} ON (NAME = {db}, FILENAME = '{db}.mdf', SIZE = {first}MB){more} "
        f"LOG ON (NAME = {db}_log, FILENAME = '{db}_log.ldf', SIZE = {log_mb}MB); "
        f"ALTER DATABASE {db} SET RECOVERY SIMPLE; USE {db}; SET NOCOUNT ON; "
        "CREATE TABLE s (k int PRIMARY KEY, v varchar(4000), w varchar(3900)); "
        f"DECLARE @i int = 0; WHILE @i < {min(src, 1000)} BEGIN "
        "INSERT INTO s VALUES (@i, REPLICATE(CAST(@i % 10 AS varchar(1)), 4000), REPLICATE('w', 3900)); SET @i += 1; END; "
        f"WHILE @i < {src} BEGIN "
        f"DECLARE @c int = CASE WHEN @i < {src} - @i THEN @i ELSE {src} - @i END; "
        "INSERT INTO s SELECT k + @i, v, w FROM s WHERE k < @c; SET @i += @c; END; "
        "CREATE TABLE t (k int PRIMARY KEY, v varchar(4000), w varchar(3900)); "
        f"DECLARE @n int = 0; WHILE @n < {rows} BEGIN "
        f"DECLARE @m int = CASE WHEN {rows} - @n < {src} THEN {rows} - @n ELSE {src} END; "
        "INSERT INTO t SELECT k + @n, v, w FROM s WHERE k < @m; SET @n += @m; END; "
        "DROP TABLE s; CHECKPOINT;"
    ), rows
