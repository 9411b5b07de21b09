#!/usr/bin/env python3
"""BACKUP / RESTORE benchmark (issue 7; seed 003's restore experiments, scaled to the disk).

In one run, on a fresh instance:
  1. Empty database restore: a database of --empty-gb GB (data file; the log --log-mb) holding
     almost nothing is backed up, then restored under a new name with instant file
     initialization on, and again with it off (trace flag 1806: the data file is zeroed).
     Seed 003: 30 GB, 21 min zeroed against 5 s with IFI. Goal: under 1 s with IFI at 30 GB.
  2. A database holding --size-gb GB (8 KB rows) is backed up and restored; each is timed
     against `cp` of the same bytes (the data file, and the backup file) in the same run,
     page cache dropped before each. Goal: backup and restore at 80% or more of cp.
  3. The restore sequence on that database under FULL recovery: a full backup, an update of
     one row in 100, a differential backup and a log backup (each against its size and the
     full one's, the log backup against cp of its own file; these use the engine's own time
     from Msg 3014, since a process start would dominate files this small), a compressed
     full backup (size against the plain one; the rows are repeated characters), then full
     WITH NORECOVERY + differential + log WITH RECOVERY, timed whole, and the restored rows
     compared with the source's.
Each step is timed around the whole `extentdb exec` statement (process start included);
prints every figure with its ratio to its baseline and writes
bench/results/<date>-<host>-backup.json.

Usage: bench/backup.py [--size-gb N] [--empty-gb N] [--dir PATH] [--binary PATH] [--keep]
"""
import argparse, datetime, json, os, re, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import BINARY, drop_cache, filled_database_sql, host, results_path  # noqa: E402
import lib  # noqa: E402


def run_sql(binary, inst, sql, flags=()):
    args = [binary, "exec", "--data-dir", inst, "-b"]
    for f in flags:
        args += ["-T", str(f)]
    t = time.perf_counter()
    p = subprocess.run(args + ["-Q", sql], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed: {sql[:200]}\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
    return wall, p.stdout


def cp_time(src, dst):
    """cp of src (not in the page cache) to dst, then dst removed."""
    drop_cache([src])
    wall = lib.cp_time(src, dst)
    os.remove(dst)
    return wall


def restore_sequence(a, inst, bak, work, plain_bytes):
    """Step 3 of the module docs, on database D."""
    fingerprint = ("SET NOCOUNT ON; SELECT 'FP:' + CAST(COUNT(*) AS varchar(20)) + '/' + "
                   "CAST(SUM(CAST(k AS bigint) + LEN(w)) AS varchar(30)) FROM {}.dbo.t;")

    def fp(db):
        _, out = run_sql(a.binary, inst, fingerprint.format(db))
        return next(l.strip()[3:] for l in out.splitlines() if l.strip().startswith("FP:"))

    def timed(sql, name=None):
        """The engine's own time (Msg 3014's seconds: no process start) and the file size."""
        wall, out = run_sql(a.binary, inst, sql)
        m = re.search(r"processed \d+ pages in ([\d.]+) seconds", out)
        secs = float(m.group(1)) if m else wall
        return max(secs, 0.001), (os.path.getsize(os.path.join(bak, name)) if name else 0)

    r = {}
    run_sql(a.binary, inst, "ALTER DATABASE D SET RECOVERY FULL;")
    r["full_s"], r["full_bytes"] = timed("BACKUP DATABASE D TO DISK = 'base.bak' WITH INIT;",
                                         "base.bak")
    t = time.perf_counter()
    run_sql(a.binary, inst, "USE D; UPDATE t SET w = REPLICATE('u', 3900) WHERE k % 100 = 0;")
    r["update_s"] = time.perf_counter() - t
    r["diff_s"], r["diff_bytes"] = timed(
        "BACKUP DATABASE D TO DISK = 'diff.bak' WITH INIT, DIFFERENTIAL;", "diff.bak")
    r["log_s"], r["log_bytes"] = timed("BACKUP LOG D TO DISK = 'log.trn' WITH INIT;", "log.trn")
    r["cp_log_s"] = cp_time(os.path.join(bak, "log.trn"), os.path.join(work, "cp.tmp"))
    r["log_over_cp"] = r["cp_log_s"] / r["log_s"]
    r["compressed_s"], r["compressed_bytes"] = timed(
        "BACKUP DATABASE D TO DISK = 'comp.bak' WITH INIT, COMPRESSION, COPY_ONLY;", "comp.bak")
    r["diff_over_full_bytes"] = r["diff_bytes"] / r["full_bytes"]
    r["compressed_over_plain_bytes"] = r["compressed_bytes"] / plain_bytes
    source = fp("D")
    t = time.perf_counter()
    run_sql(a.binary, inst,
            "RESTORE DATABASE D3 FROM DISK = 'base.bak' WITH NORECOVERY, "
            "MOVE 'D' TO 'D3.mdf', MOVE 'D_log' TO 'D3_log.ldf';")
    run_sql(a.binary, inst, "RESTORE DATABASE D3 FROM DISK = 'diff.bak' WITH NORECOVERY;")
    run_sql(a.binary, inst, "RESTORE LOG D3 FROM DISK = 'log.trn' WITH RECOVERY;")
    r["sequence_restore_s"] = time.perf_counter() - t
    r["rows_equal"] = 1.0 if fp("D3") == source else 0.0
    run_sql(a.binary, inst, "DROP DATABASE D3;")
    print(f"sequence: differential {r['diff_bytes'] / 1e6:.0f} MB "
          f"({r['diff_over_full_bytes']:.2f} of the full {r['full_bytes'] / 1e6:.0f} MB) in "
          f"{r['diff_s']:.2f} s; log backup {r['log_bytes'] / 1e6:.0f} MB in {r['log_s']:.2f} s "
          f"({r['log_over_cp']:.2f}x cp of it); compressed full {r['compressed_bytes'] / 1e6:.0f} MB "
          f"({r['compressed_over_plain_bytes']:.2f} of plain) in {r['compressed_s']:.2f} s; "
          f"full + differential + log restored in {r['sequence_restore_s']:.2f} s, "
          f"rows {'equal' if r['rows_equal'] else 'DIFFER'}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--empty-gb", type=float, default=20.0)
    ap.add_argument("--log-mb", type=int, default=64,
                    help="log file size of both databases (always zeroed, by restore too)")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--binary", default=BINARY)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="xdb-bench-backup-", dir=a.dir)
    inst = os.path.join(work, "inst")
    data = os.path.join(inst, "data")
    bak = os.path.join(inst, "backup")
    results = {}
    try:
        subprocess.run([a.binary, "setup", "--data-dir", inst, "--tempdb-files", "1"],
                       check=True, capture_output=True)

        # 1. The empty database (skipped with --empty-gb 0).
        mb = int(a.empty_gb * 1024)
        if mb > 0:
            run_sql(a.binary, inst,
                    f"CREATE DATABASE E ON (NAME = E, FILENAME = 'E.mdf', SIZE = {mb}MB) "
                    f"LOG ON (NAME = E_log, FILENAME = 'E_log.ldf', SIZE = {a.log_mb}MB); "
                    "USE E; CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1);")
            run_sql(a.binary, inst, "BACKUP DATABASE E TO DISK = 'e.bak' WITH INIT;")
            empty = {"data_gb": a.empty_gb, "log_mb": a.log_mb,
                     "backup_bytes": os.path.getsize(os.path.join(bak, "e.bak"))}
            for ifi, flags in (("on", ()), ("off", (1806,))):
                name = f"E_{ifi}"
                wall, _ = run_sql(a.binary, inst,
                                  f"RESTORE DATABASE {name} FROM DISK = 'e.bak' WITH "
                                  f"MOVE 'E' TO '{name}.mdf', MOVE 'E_log' TO '{name}_log.ldf';",
                                  flags)
                empty[f"restore_ifi_{ifi}_s"] = wall
                run_sql(a.binary, inst, f"DROP DATABASE {name};")
            # The log (1 GB) is zeroed either way: its share, measured alone.
            wall, _ = run_sql(a.binary, inst,
                              "CREATE DATABASE L ON (NAME = L, FILENAME = 'L.mdf', SIZE = 8MB) "
                              "LOG ON (NAME = L_log, FILENAME = 'L_log.ldf', SIZE = 1GB);")
            empty["create_with_1gb_log_s"] = wall
            run_sql(a.binary, inst, "DROP DATABASE L; DROP DATABASE E;")
            empty["ifi_gain"] = empty["restore_ifi_off_s"] / empty["restore_ifi_on_s"]
            results["empty_restore"] = empty
            print(f"empty {a.empty_gb:g} GB database ({empty['backup_bytes'] / 1e6:.1f} MB backup): "
                  f"restore {empty['restore_ifi_on_s']:.2f} s with IFI, "
                  f"{empty['restore_ifi_off_s']:.2f} s without ({empty['ifi_gain']:.1f}x); "
                  f"creating a 1 GB log alone takes {wall:.2f} s")

        # 2. A database holding data.
        sql, rows = filled_database_sql("D", a.size_gb, int(a.size_gb * 1024) + 256, a.log_mb)
        t = time.perf_counter()
        run_sql(a.binary, inst, sql)
        print(f"database D: {rows} rows, built in {time.perf_counter() - t:.0f} s")
        mdf = os.path.join(data, "D.mdf")
        drop_cache([mdf])
        wall, out = run_sql(a.binary, inst, "BACKUP DATABASE D TO DISK = 'd.bak' WITH INIT;")
        bfile = os.path.join(bak, "d.bak")
        size = os.path.getsize(bfile)
        m = re.search(r"processed (\d+) pages", out)
        pages = int(m.group(1)) if m else 0
        cp_src = cp_time(mdf, os.path.join(work, "cp.tmp"))
        drop_cache([bfile])
        rwall, _ = run_sql(a.binary, inst,
                           "RESTORE DATABASE D2 FROM DISK = 'd.bak' WITH "
                           "MOVE 'D' TO 'D2.mdf', MOVE 'D_log' TO 'D2_log.ldf';")
        cp_bak = cp_time(bfile, os.path.join(work, "cp.tmp"))
        mdf_size = os.path.getsize(mdf)
        full = {
            "data_file_bytes": mdf_size,
            "backup_bytes": size,
            "backup_pages": pages,
            "backup_s": wall,
            "backup_MBps": size / wall / 1e6,
            "cp_data_file_s": cp_src,
            "cp_data_file_MBps": mdf_size / cp_src / 1e6,
            "backup_over_cp": (size / wall) / (mdf_size / cp_src),
            "restore_s": rwall,
            "restore_MBps": size / rwall / 1e6,
            "cp_backup_file_s": cp_bak,
            "cp_backup_file_MBps": size / cp_bak / 1e6,
            "restore_over_cp": (size / rwall) / (size / cp_bak),
        }
        results["full"] = full
        print(f"backup: {size / 1e9:.2f} GB in {wall:.2f} s = {full['backup_MBps']:.0f} MB/s; "
              f"cp of the data file {full['cp_data_file_MBps']:.0f} MB/s: "
              f"{full['backup_over_cp']:.2f}x")
        print(f"restore: {full['restore_MBps']:.0f} MB/s; cp of the backup file "
              f"{full['cp_backup_file_MBps']:.0f} MB/s: {full['restore_over_cp']:.2f}x")
        run_sql(a.binary, inst, "DROP DATABASE D2;")
        results["sequence"] = restore_sequence(a, inst, bak, work, size)

        out = {"benchmark": "backup", "date": datetime.date.today().isoformat(),
               "host": host(), "results": results}
        path = results_path("backup")
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {path}")
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
