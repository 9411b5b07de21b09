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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import BINARY, dd_zero, fallocate_fsync, results_path, timed, timed_sql  # noqa: E402
import lib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=int, default=20)
    ap.add_argument("--dir", default=None, help="directory on the file system to measure")
    ap.add_argument("--binary", default=BINARY)
    a = ap.parse_args()
    n = a.size_gb
    size = n << 30
    work = tempfile.mkdtemp(prefix="xdb-bench-", dir=a.dir)
    try:
        base = os.path.join(work, "baseline")
        t_falloc = timed(lambda: fallocate_fsync(base, size)); os.unlink(base)
        t_dd = timed(lambda: dd_zero(base, size)); os.unlink(base)
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
        r["create_ifi_s"] = create("ifi_on", ())
        r["grow_ifi_s"] = grow("ifi_on", ())
        lib.exec_sql(a.binary, inst, "DROP DATABASE ifi_on")
        r["create_zeroed_s"] = create("ifi_off", (1806,))
        r["grow_zeroed_s"] = grow("ifi_off", (1806,))
        lib.exec_sql(a.binary, inst, "DROP DATABASE ifi_off")
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
        out = results_path("ifi")
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
