#!/usr/bin/env python3
"""Instant file initialization benchmark (issue 2, seed 001/003).

Measures, on one file system in one run:
  - baseline: fallocate + fsync of N GB, and a dd zero-write of N GB (conv=fdatasync);
  - extentdb: CREATE DATABASE with an N GB data file with IFI on and with IFI off
    (trace flag 1806), and ALTER DATABASE ... MODIFY FILE growing a file by N GB, both ways.
Each extentdb figure is timed inside the engine (DATEDIFF over SYSDATETIME, as seed 001's
script does), so process start-up is excluded. Prints figures and ratios and writes JSON to
bench/results/<date>-<host>-ifi.json.

Usage: bench/ifi.py [--size-gb N] [--dir PATH] [--binary PATH]
"""
import argparse, datetime, json, os, re, shutil, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fallocate_fsync(path, size):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def dd_zero(path, size_gb):
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=8M", f"count={size_gb * 128}",
                    "conv=fdatasync", "status=none"], check=True)


def exec_sql(binary, data_dir, sql):
    p = subprocess.run([binary, "exec", "--data-dir", data_dir, "-b", "-Q", sql],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"extentdb failed:\n{p.stdout}\n{p.stderr}")
    nums = [int(x) for x in re.findall(r"^\s*(\d+)\s*$", p.stdout, re.M)]
    if not nums:
        sys.exit(f"no timing in output:\n{p.stdout}")
    return nums[-1] / 1e6


def timed_sql(binary, data_dir, body, flags=""):
    return exec_sql(binary, data_dir, f"{flags} DECLARE @t DATETIME2 = SYSDATETIME(); {body}; "
                    "SELECT DATEDIFF(MICROSECOND, @t, SYSDATETIME())")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=int, default=20)
    ap.add_argument("--dir", default=None, help="directory on the file system to measure")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/extentdb"))
    a = ap.parse_args()
    n = a.size_gb
    size = n << 30
    work = tempfile.mkdtemp(prefix="xdb-bench-", dir=a.dir)
    try:
        base = os.path.join(work, "baseline")
        t_falloc = timed(lambda: fallocate_fsync(base, size)); os.unlink(base)
        t_dd = timed(lambda: dd_zero(base, n)); os.unlink(base)
        inst = os.path.join(work, "inst")
        subprocess.run([a.binary, "setup", "--data-dir", inst, "--tempdb-files", "1"], check=True,
                       capture_output=True)
        root = os.path.join(inst, "data")

        def create(name, flags):
            return timed_sql(a.binary, inst,
                             f"CREATE DATABASE {name} ON (NAME={name}, FILENAME='{root}/{name}.mdf', SIZE={n}GB) "
                             f"LOG ON (NAME={name}_log, FILENAME='{root}/{name}_log.ldf', SIZE=512KB)", flags)

        def grow(name, flags):
            return timed_sql(a.binary, inst,
                             f"ALTER DATABASE {name} MODIFY FILE (NAME={name}, SIZE={2 * n}GB)", flags)

        r = {}
        r["create_ifi_s"] = create("ifi_on", "")
        r["grow_ifi_s"] = grow("ifi_on", "")
        exec_sql(a.binary, inst, "DROP DATABASE ifi_on; SELECT 0")
        r["create_zeroed_s"] = create("ifi_off", "DBCC TRACEON (1806, -1);")
        r["grow_zeroed_s"] = grow("ifi_off", "DBCC TRACEON (1806, -1);")
        exec_sql(a.binary, inst, "DROP DATABASE ifi_off; SELECT 0")
        result = {
            "benchmark": "ifi", "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "host": socket.gethostname(), "size_gb": n, "dir": work,
            "baseline_fallocate_fsync_s": t_falloc, "baseline_dd_zero_s": t_dd, **r,
            "ratio_ifi_create_vs_fallocate": r["create_ifi_s"] / t_falloc,
            "ratio_zeroed_create_speed_vs_dd": t_dd / r["create_zeroed_s"],
            "ratio_zeroed_grow_speed_vs_dd": t_dd / r["grow_zeroed_s"],
            "ratio_zeroed_vs_ifi_create": r["create_zeroed_s"] / r["create_ifi_s"],
            "goals": {"zeroed_speed_vs_dd_min": 0.9, "ifi_create_vs_fallocate_max": 2.0},
        }
        for k, v in result.items():
            if isinstance(v, float):
                print(f"{k:40s} {v:12.4f}")
        os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
        out = os.path.join(ROOT, "bench/results",
                           f"{datetime.date.today()}-{socket.gethostname()}-ifi.json")
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
