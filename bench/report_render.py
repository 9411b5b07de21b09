"""Renders bench/report.py's results as a Markdown report with PNG charts (matplotlib).

`render(res, out, stamp)` writes <out>/<stamp>.md and the charts into <out>/<stamp>/;
`python3 bench/report_render.py RESULTS.json` renders a results file again.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

ON, OFF, BASE, PEER = "#1f77b4", "#d62728", "#7f7f7f", "#2ca02c"


def _save(fig, figdir, name):
    path = os.path.join(figdir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return name


def label(ax, xlabel, ylabel, title, log=False, legend=True):
    """Axis labels, title, log scale on y, legend and grid, as every chart here has them."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    if legend:
        ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)


def fmt_x(r):
    """A ratio: whole below 10 only when it is at least 10."""
    return f"{r:.0f}x" if r >= 10 else f"{r:.2f}x"


def fmt_s(s):
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 120:
        return f"{s:.2f} s"
    return f"{s / 60:.1f} min"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ---- One section per part: (markdown, [chart file names]) ----

def sec_machine(m):
    md = ["## The machine's limits (the baselines)",
          f"One file of {m['bytes'] / 2**30:g} GiB on the scratch file system:",
          table(["operation", "result"], [
              ["fallocate + fsync", fmt_s(m["fallocate_fsync_s"])],
              ["dd zero-write (8 MiB blocks, conv=fdatasync)", f"{m['dd_zero_MBps']:.0f} MB/s"],
              ["dd sequential read, page cache dropped", f"{m['read_cold_MBps']:.0f} MB/s"],
              ["cp, source not cached, written back", f"{m['cp_MBps']:.0f} MB/s"]])]
    return "\n\n".join(md), []


def sec_seed001(s, figdir, machine):
    rows = s["sizes"]
    xs = [r["size_gb"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.loglog(xs, [r["ifi_on_s"] for r in rows], "o-", color=ON, label="extentdb, IFI on")
    ax1.loglog(xs, [r["ifi_off_s"] for r in rows], "s-", color=OFF, label="extentdb, IFI off (TF 1806)")
    if machine:
        ax1.loglog(xs, [x * 2**30 / (machine["dd_zero_MBps"] * 1e6) for x in xs], "--", color=BASE,
                   label=f"dd zero-write at {machine['dd_zero_MBps']:.0f} MB/s")
    label(ax1, "data file size (GB)", "CREATE DATABASE time (s)", "Seed 001: create time against size")
    ax2.semilogx(xs, [r["gain"] for r in rows], "o-", color=ON, label="extentdb: IFI off / on")
    ax2.semilogx([0.5, 10], [10, 100], "x", color=BASE, markersize=10,
                 label="seed 001 (SQL Server 2016, a laptop)")
    label(ax2, "data file size (GB)", "time without IFI / time with IFI", "The IFI gain against size",
          log=True)
    name = _save(fig, figdir, "seed001-create-by-size.png")
    head = ["size", "IFI on", "IFI off", "gain (off / on)"]
    if machine:
        head.append("IFI off speed / dd zero-write")
    trs = []
    for r in rows:
        t = [f"{r['size_gb']:g} GB", fmt_s(r["ifi_on_s"]), fmt_s(r["ifi_off_s"]), fmt_x(r["gain"])]
        if machine:
            t.append(f"{r['off_speed_vs_dd_zero']:.2f}")
        trs.append(t)
    md = ["## Seed 001: CREATE DATABASE with and without instant file initialization",
          "Timed inside the engine (DATEDIFF over SYSDATETIME, as the seed's script), log 1 MB. "
          "The seed measured 10x at 512 MB and 100x at 10 GB on a laptop's disk.",
          table(head, trs), f"![create time by size]({os.path.basename(figdir)}/{name})"]
    return "\n\n".join(md), [name]


def sec_seed002(s, figdir):
    runs = s["runs"]
    layouts = []
    for r in runs:
        k = (r["tempdb_files"], r["file_mb"])
        if k not in layouts:
            layouts.append(k)
    fig, ax = plt.subplots(figsize=(7, 4))
    w = 0.38
    for i, (ifi, color) in enumerate((("on", ON), ("off", OFF))):
        vals = [next(r["total_s"] for r in runs if (r["tempdb_files"], r["file_mb"]) == k and r["ifi"] == ifi)
                for k in layouts]
        ax.bar([j + (i - 0.5) * w for j in range(len(layouts))], vals, w, color=color,
               label=f"IFI {ifi}")
    ax.set_xticks(range(len(layouts)))
    ax.set_xticklabels([f"{n} x {mb} MB tempdb" for n, mb in layouts])
    ax.set_ylabel("setup + first start (s)")
    ax.set_title("Seed 002: instance setup by tempdb size")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    name = _save(fig, figdir, "seed002-setup.png")
    trs = [[f"{r['tempdb_files']} x {r['file_mb']} MB", r["ifi"], fmt_s(r["setup_s"]),
            fmt_s(r["first_start_s"]), fmt_s(r["total_s"]), f"{r['vs_ifi_on']:.2f}"] for r in runs]
    md = ["## Seed 002: instance setup with tempdb files of 8 MB and of 1 GB",
          "`extentdb setup` creates master, model and msdb; tempdb is created at every start, so the "
          "first start is counted with it (together, what SQL Server's setup does). extentdb has "
          "no 1,024 MB cap on tempdb files.",
          table(["tempdb", "IFI", "setup", "first start", "total", "total / IFI on"], trs),
          f"![setup by tempdb size]({os.path.basename(figdir)}/{name})"]
    return "\n\n".join(md), [name]


SEED003_OPS = [("create", "CREATE DATABASE, {create_gb:g} GB data file"),
               ("grow", "ALTER DATABASE, grow by {grow_gb:g} GB"),
               ("restore_empty", "RESTORE {restore_db_gb:g} GB database (empty backup)"),
               ("restore_data", "RESTORE {restore_db_gb:g} GB database ({restore_data_gb:g} GB backup)")]


def sec_seed003(s, figdir, machine):
    fig, ax = plt.subplots(figsize=(10, 4.5))
    w = 0.38
    labels = [lbl.format(**s) for _, lbl in SEED003_OPS]
    for i, (ifi, color) in enumerate((("on", ON), ("off", OFF))):
        vals = [s[f"{op}_ifi_{ifi}_s"] for op, _ in SEED003_OPS]
        bars = ax.bar([j + (i - 0.5) * w for j in range(4)], vals, w, color=color, label=f"IFI {ifi}")
        for b, v in zip(bars, vals):
            ax.annotate(fmt_s(v), (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom",
                        fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(4))
    ax.set_xticklabels([lbl.replace(", ", ",\n").replace(" (", "\n(") for lbl in labels], fontsize=8)
    ax.set_ylabel("seconds (log scale)")
    ax.set_title("Seed 003's table on this machine")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    name = _save(fig, figdir, "seed003-table.png")
    seed = s["seed_2007_s"]
    trs = []
    for (op, _), lbl in zip(SEED003_OPS, labels):
        trs.append([lbl, fmt_s(s[f"{op}_ifi_on_s"]), fmt_s(s[f"{op}_ifi_off_s"]),
                    fmt_x(s[f"{op}_gain"]), fmt_s(seed[f"{op}_ifi_on"]), fmt_s(seed[f"{op}_ifi_off"])])
    md = ["## Seed 003: create, grow and restore, with and without IFI",
          f"Each timed inside the engine (DATEDIFF over SYSDATETIME around the statement); the log "
          f"is {s['log_mb']} MB ({s['data_log_mb']} MB for the database holding data), and is zeroed either way. The restored database's rows are counted after each restore "
          f"(both correct: {s['restore_data_ifi_on_rows_ok'] and s['restore_data_ifi_off_rows_ok']}). "
          "The seed's figures (SQL Server 2005, four 15,000 rpm disks, 2007) are at full size.",
          table(["operation", "IFI on", "IFI off", "gain", "seed: IFI on", "seed: IFI off"], trs),
          f"![seed 003 table]({os.path.basename(figdir)}/{name})"]
    return "\n\n".join(md), [name]


def sec_seed004(s, figdir):
    names = []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    fids = sorted({fid for smp in s["samples"] for fid in smp["files"]}, key=int)
    xs = [smp["rows"] for smp in s["samples"]]
    for fid in fids:
        ax1.plot(xs, [smp["files"].get(fid, {}).get("used_pages", 0) * 8 / 1024 for smp in s["samples"]],
                 "o-", markersize=3, label=f"file {fid}")
    label(ax1, "BigRows rows inserted", "space used (MB)", "Seed 004: space used per file over the run")
    rc = s["recalculations"]
    ids = sorted({x["file_id"] for r in rc for x in r["files"]})
    for fid in ids:
        ys = [next((x["skip_target"] for x in r["files"] if x["file_id"] == fid), None) for r in rc]
        ax2.step(range(1, len(rc) + 1), [y if y is not None else float("nan") for y in ys],
                 where="mid", marker="o", label=f"file {fid}")
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    label(ax2, "recalculation (trace flag 1165)", "skip target", "Skip targets at each recalculation",
          log=True)
    names.append(_save(fig, figdir, "seed004-bigrows.png"))
    al = s["allocation"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    summ = al["summary"]
    labels = [f"{x['layout']}\n{x['threads']} thread{'s' if x['threads'] > 1 else ''}" for x in summ]
    w = 0.4
    ax1.bar([i - w / 2 for i in range(len(summ))], [x["fill_per_s"] for x in summ], w,
            color=OFF, label="under the database lock")
    ax1.bar([i + w / 2 for i in range(len(summ))], [x.get("shared_per_s", 0) for x in summ], w,
            color=ON, label="shared (no database lock)")
    ax1.legend(fontsize=8)
    ax1.set_xticks(range(len(summ)))
    ax1.set_xticklabels(labels, fontsize=8)
    ax1.set_ylabel("extent allocations / s (proportional fill)")
    ax1.set_title("Allocation throughput, equal against unequal files")
    ax1.grid(True, axis="y", alpha=0.3)
    nf = al["new_file_in_full_filegroup"]
    bottoms = [0] * len(nf)
    fids = sorted({k for x in nf for k in x["per_file"]}, key=int)
    for fid in fids:
        vals = [x["per_file"].get(fid, 0) / sum(x["per_file"].values()) for x in nf]
        ax2.bar(range(len(nf)), vals, bottom=bottoms, label=f"file {fid}")
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax2.set_xticks(range(len(nf)))
    ax2.set_xticklabels([f"old files {x['old_files_free_percent']}% free\n"
                         f"{'REBALANCE' if x['rebalance_extents_moved'] is not None else 'no rebalance'}"
                         for x in nf], fontsize=8)
    ax2.set_ylabel("share of the next allocations")
    ax2.set_title("A file added to a full filegroup")
    ax2.legend(fontsize=8)
    names.append(_save(fig, figdir, "seed004-allocation.png"))
    rctab = []
    for i, r in enumerate(rc, 1):
        most = max((x["free"] for x in r["files"]), default=0)
        rctab.append([i, r["m_cAllocs_before"], ", ".join(
            f"{x['name']} ({x['file_id']}): {x['free']} free, skip {x['skip_target']}" for x in r["files"]),
            most])
    mm = s["skip_target_mismatches"]
    md = ["## Seed 004: proportional fill",
          f"Seed 004's script (Company, SecondFile, ThirdFile, BigRows) with trace flags 1165 and "
          f"3605: {s['rows']:,} single-row inserts in {fmt_s(s['seconds'])} "
          f"({s['rows_per_s']:.0f} rows/s), each file's space sampled every 1/14 of the rows. "
          f"Every skip target the error log printed is the integer quotient of the free-extent "
          f"figures printed with it: {'yes' if not mm else f'NO ({len(mm)} differ)'}.",
          table(["recalculation", "m_cAllocs before", "files (free extents, skip target)", "most free"], rctab),
          f"![BigRows]({os.path.basename(figdir)}/{names[0]})",
          "Extent allocations through proportional fill (`crates/storage/examples/allocation_throughput.rs`; "
          f"equal files {al['equal_file_extents']} extents, unequal {al['unequal_file_extents']}), "
          "against a plain in-memory round robin doing nothing else "
          f"({al['in_memory_plain_round_robin_per_s']:,.0f}/s):",
          table(["layout", "threads", "fill / s", "shared / s", "shared / fill",
                 "FGCB_PRP_FILL per extent (shared)", "collisions", "fill + log flush / s",
                 "direct (no fill) / s", "fill+flush / direct"],
                [[x["layout"], x["threads"], f"{x['fill_per_s']:,.0f}", f"{x['shared_per_s']:,.0f}",
                  f"{x['ratio_shared_vs_fill_rate']:.2f}",
                  f"{x['shared_prp_fill_acquisitions_per_extent']:.2f}",
                  f"{x['shared_prp_fill_collisions']:.0f}", f"{x['fill_flush_per_s']:,.0f}",
                  f"{x['direct_per_s']:,.0f}", f"{x['ratio_fill_flush_vs_direct_rate']:.2f}"] for x in summ]),
          table(["old files free", "REBALANCE moved", "extents per file after"],
                [[f"{x['old_files_free_percent']}%",
                  "-" if x["rebalance_extents_moved"] is None else x["rebalance_extents_moved"],
                  ", ".join(f"file {k}: {v}" for k, v in sorted(x["per_file"].items(), key=lambda kv: int(kv[0])))]
                 for x in nf]),
          f"![allocation]({os.path.basename(figdir)}/{names[1]})"]
    return "\n\n".join(md), names


def sec_checkdb(c, figdir):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    res = c["results"]
    for cache, style in (("cold", "--"), ("warm", "-")):
        for mode, color in (("PHYSICAL_ONLY", ON), ("full", OFF)):
            pts = sorted((x["maxdop"], x["MBps"] / 1e3) for x in res[cache]["checks"] if x["mode"] == mode)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=color,
                    label=f"{mode}, {cache}")
        ax.axhline(res[cache]["read_MBps"] / 1e3, linestyle=style, color=BASE, linewidth=1,
                   label=f"dd read, {cache}")
    ax.set_xticks(sorted({x["maxdop"] for x in res["warm"]["checks"]}))
    label(ax, "MAXDOP", "GB/s", f"DBCC CHECKDB on {c['data_file_bytes'] / 1e9:.1f} GB by MAXDOP "
          f"({c['cores']} cores)", log=True)
    name = _save(fig, figdir, "checkdb-maxdop.png")
    trs = []
    for cache in ("cold", "warm"):
        for x in res[cache]["checks"]:
            trs.append([cache, x["mode"], x["maxdop"], f"{x['MBps']:,.0f} MB/s", f"{x['ratio_to_read']:.2f}"])
    fop = [[cache, dop, f"{r:.2f}"] for cache in ("cold", "warm")
           for dop, r in res[cache]["full_over_physical"].items()]
    md = ["## Seed 004's CHECKDB article: GB/s by MAXDOP",
          f"`extentdb checkdb` on a stopped instance's {c['data_file_bytes'] / 1e9:.2f} GB data file "
          "(one 7.9 KB row per page, a clustered index); each check paired with a dd read of the "
          f"same file just before it; medians of {c['rounds']}. Goals (issue 6): PHYSICAL_ONLY at "
          "0.8 of the read or more, full at 0.5 of PHYSICAL_ONLY or more.",
          table(["cache", "check", "MAXDOP", "speed", "/ dd read"], trs),
          table(["cache", "MAXDOP", "full / PHYSICAL_ONLY"], fop),
          f"![CHECKDB by MAXDOP]({os.path.basename(figdir)}/{name})"]
    return "\n\n".join(md), [name]


def sec_backup(b):
    md = ["## BACKUP and RESTORE against cp",
          f"A database holding {b['data_file_bytes'] / 1e9:.2f} GB; page cache dropped before each step.",
          table(["operation", "speed", "baseline", "ratio"], [
              ["BACKUP DATABASE", f"{b['backup_MBps']:.0f} MB/s", f"cp of the data file {b['cp_data_file_MBps']:.0f} MB/s",
               f"{b['backup_over_cp']:.2f}"],
              ["RESTORE DATABASE", f"{b['restore_MBps']:.0f} MB/s", f"cp of the backup file {b['cp_backup_file_MBps']:.0f} MB/s",
               f"{b['restore_over_cp']:.2f}"]])]
    s = b.get("sequence")
    if s:
        md.append("The restore sequence on the same database under FULL recovery, after an "
                  "update of one row in 100:")
        md.append(table(["step", "size", "time", "against"], [
            ["BACKUP DATABASE (full)", f"{s['full_bytes'] / 1e6:.0f} MB", f"{s['full_s']:.2f} s", ""],
            ["BACKUP ... DIFFERENTIAL", f"{s['diff_bytes'] / 1e6:.0f} MB", f"{s['diff_s']:.2f} s",
             f"{s['diff_over_full_bytes']:.2f} of the full backup's bytes"],
            ["BACKUP LOG", f"{s['log_bytes'] / 1e6:.0f} MB", f"{s['log_s']:.2f} s",
             f"{s['log_over_cp']:.2f}x cp of the log backup file"],
            ["BACKUP ... COMPRESSION", f"{s['compressed_bytes'] / 1e6:.0f} MB", f"{s['compressed_s']:.2f} s",
             f"{s['compressed_over_plain_bytes']:.2f} of the plain backup's bytes (rows of repeated characters)"],
            ["RESTORE full, differential, log", "", f"{s['sequence_restore_s']:.2f} s",
             "rows equal" if s["rows_equal"] else "ROWS DIFFER"]]))
    return "\n\n".join(md), []


def sec_peers(p, figdir, backup):
    i = p["inserts"]
    engines = [("extentdb", ON), ("postgres", PEER), ("sqlite", BASE)]
    engines = [e for e in engines if f"autocommit_{e[0]}_rows_per_s" in i]
    ncols = 3 if "tds" in p else 2
    fig, axes = plt.subplots(1, ncols, figsize=(4.2 * ncols, 4.2))
    for ax, w, title in ((axes[0], "autocommit", "Single-row autocommit inserts"),
                         (axes[1], "bulk", "Inserts in one transaction")):
        vals = [i[f"{w}_{e}_rows_per_s"] for e, _ in engines]
        ax.bar([e for e, _ in engines], vals, color=[c for _, c in engines])
        ax.set_ylabel("rows / s (8,000-byte rows)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    if "tds" in p:
        t = p["tds"]["results"]
        keys = list(t)
        x = range(len(keys))
        axes[2].bar([k - 0.2 for k in x], [t[k]["extentdb_per_s"] for k in keys], 0.4, color=ON, label="extentdb")
        axes[2].bar([k + 0.2 for k in x], [t[k]["postgres_per_s"] for k in keys], 0.4, color=PEER, label="PostgreSQL")
        axes[2].set_xticks(list(x))
        axes[2].set_xticklabels(keys, fontsize=8)
        axes[2].set_ylabel("operations / s over the wire")
        axes[2].set_title("TDS against PostgreSQL's protocol", fontsize=10)
        axes[2].legend(fontsize=8)
        axes[2].grid(True, axis="y", alpha=0.3)
    name = _save(fig, figdir, "peers.png")
    trs = []
    for w, lbl in (("autocommit", "single-row autocommit inserts"), ("bulk", "inserts in one transaction")):
        row = [lbl, f"{i[f'{w}_extentdb_rows_per_s']:,.0f}"]
        row.append(f"{i[f'{w}_postgres_rows_per_s']:,.0f} ({i[f'{w}_extentdb_vs_postgres']:.2f}x)"
                   if f"{w}_postgres_rows_per_s" in i else "not run")
        row.append(f"{i[f'{w}_sqlite_rows_per_s']:,.0f} ({i[f'{w}_extentdb_vs_sqlite']:.2f}x)")
        trs.append(row)
    md = ["## extentdb against its peers",
          f"{i['rows']:,} rows of CHAR(8000) (seed 004's BigRows) per engine, each committing durably "
          "(PostgreSQL: fsync and synchronous_commit on; SQLite: WAL, synchronous=FULL); medians of "
          f"{i['rounds']} interleaved rounds (`bench/data_path.py`). Ratios are extentdb's rate over the peer's.",
          table(["workload", "extentdb rows/s", "PostgreSQL", "SQLite"], trs),
          f"Crash recovery after SIGKILL: {i['recovery_log_bytes_read'] / 1e6:.1f} MB of log read, start-up "
          f"{fmt_s(i['recovery_startup_s'])} against {fmt_s(i['recovery_clean_startup_s'])} with nothing to recover. "
          f"Log writing in the bulk load: {i['bulk_extentdb_log_mb_per_s']:.1f} MB/s against dd's "
          f"{i['dd_mb_per_s']:.0f} MB/s (the load is CPU-bound, not log-bound)."]
    if "tds" in p:
        t = p["tds"]["results"]
        md.append(table(["over the wire (`bench/tds.py`)", "extentdb / s", "PostgreSQL / s", "ratio"],
                        [[k, f"{v['extentdb_per_s']:,.0f}", f"{v['postgres_per_s']:,.0f}",
                          f"{v['ratio_extentdb_to_postgres']:.2f}"] for k, v in t.items()]))
    md.append(f"![peers]({os.path.basename(figdir)}/{name})")
    names = [name]
    if "backup_and_check" in p:
        bc = p["backup_and_check"]
        b, c = bc["backup"], bc["check"]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        eng = [("extentdb", ON), ("postgres", PEER), ("sqlite", BASE)]
        ax1.bar([e for e, _ in eng], [b[e]["logical_GBps"] for e, _ in eng], color=[col for _, col in eng])
        ax1.set_ylabel("GB of rows per second")
        ax1.set_title("Backup, files not cached", fontsize=10)
        ax1.grid(True, axis="y", alpha=0.3)
        checks = [("extentdb_physical_only", "extentdb\nPHYSICAL_ONLY", ON),
                  ("extentdb_full", "extentdb\nfull", ON),
                  ("postgres_amcheck_heapallindexed", "pg_amcheck\nheapallindexed", PEER),
                  ("sqlite_integrity_check", "SQLite\nintegrity_check", BASE)]
        ax2.bar([lbl for _, lbl, _ in checks], [c[k]["logical_GBps"] for k, _, _ in checks],
                color=[col for _, _, col in checks])
        ax2.set_ylabel("GB of rows per second")
        ax2.set_title("Consistency check, warm cache, MAXDOP 1 / one job", fontsize=10)
        ax2.tick_params(axis="x", labelsize=8)
        ax2.grid(True, axis="y", alpha=0.3)
        names.append(_save(fig, figdir, "peers-backup-check.png"))
        md.append(
            f"Backup and consistency check of the same table in each engine, {bc['rows']:,} rows "
            f"({bc['logical_bytes'] / 1e9:.2f} GB of rows; files: "
            + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in bc["files_bytes"].items())
            + ") (`bench/peers.py`). Backups: extentdb `BACKUP DATABASE`, PostgreSQL `pg_basebackup`, "
            "SQLite's online backup API, each synced; checks: `extentdb checkdb` at MAXDOP 1, "
            "`pg_amcheck --heapallindexed -j 1`, `PRAGMA integrity_check`.")
        md.append(table(["backup", "seconds", "GB of rows / s", "bytes written / s over cp of its own files"],
                        [[e, f"{v['s']:.2f}", f"{v['logical_GBps']:.2f}", f"{v['speed_over_own_cp']:.2f}"]
                         for e, v in b.items()]))
        md.append(table(["check", "seconds", "GB of rows / s", "over extentdb full"],
                        [[k, f"{v['s']:.2f}", f"{v['logical_GBps']:.2f}",
                          f"{v['logical_GBps'] / c['extentdb_full']['logical_GBps']:.2f}"] for k, v in c.items()]))
        md.append(f"![backup and check against peers]({os.path.basename(figdir)}/{names[-1]})")
    return "\n\n".join(md), names


def sec_memory(m):
    md = ["## Memory against the cap (bench/memory.py)",
          f"One server set up with `--max-server-memory-mb {m['cap_mib']}`; tables `big` (heap) "
          f"and `bigc` (clustered) of {m['tables']['rows_each']:,} rows ({m['tables']['row']}, "
          f"{m['tables']['pages_each_mib']:,} MiB each). Peak RSS is VmHWM, reset before each "
          f"case; the limit is {m['headroom_factor']:g} x the cap + "
          f"{m['allowance_mib_per_connection']} MiB per connection. These ratios are gates only "
          "when `MEMORY_GATES` in bench/report.py is on (when the streaming executor lands).",
          table(["case", "conns", "outcome", "wall", "baseline RSS", "peak RSS", "limit",
                 "ratio", "held"],
                [[c["case"], c["connections"],
                  "ok" if c["ok"] else ("refused " + ",".join(map(str, c.get("error_numbers", [])))
                                        if c.get("acceptable") else "**failed**"),
                  fmt_s(c["wall_s"]), f"{c['baseline_rss_mib']:,.0f} MiB",
                  f"{'killed at >= ' if c.get('killed_at_ceiling') else ''}{c['peak_rss_mib']:,.0f} MiB",
                  f"{c['limit_mib']:,.0f} MiB",
                  f"{c['ratio']:.2f}", "yes" if c["held"] else "**no**"] for c in m["cases"]])]
    return "\n\n".join(md), []


def _conc_rate(r):
    if not r or not r.get("runs"):
        return "failed" if r and r.get("error") else "-"
    return f"{r['median']:,.0f} [{r['min']:,.0f}-{r['max']:,.0f}]"


def _conc_cpu(r, key):
    v = (r or {}).get(key)
    return "-" if v is None else f"{v:,.1f}"


def _conc_cpu_cells(x, p):
    """Server CPU per operation of each engine, their ratio, and the client's per engine
    (medians of the runs, microseconds; "-" where not measured)."""
    key = "server_cpu_us_per_op_median"
    xs, ps = x.get(key), (p or {}).get(key)
    return [f"{_conc_cpu(x, key)} / {_conc_cpu(p, key)}",
            fmt_x(xs / ps) if xs and ps else "-",
            f"{_conc_cpu(x, 'client_cpu_us_per_op_median')} / "
            f"{_conc_cpu(p, 'client_cpu_us_per_op_median')}"]


def _conc_panel(ax, name, figs, engines):
    """One workload: median rate against connections, the rounds' range as error bars."""
    for e, color, marker in engines:
        pts = [(f["connections"], f["engines"][e]) for f in figs
               if f["engines"].get(e, {}).get("runs")]
        if not pts:
            continue
        xs = [x for x, _ in pts]
        med = [r["median"] for _, r in pts]
        err = [[r["median"] - r["min"] for _, r in pts], [r["max"] - r["median"] for _, r in pts]]
        ax.errorbar(xs, med, yerr=err, fmt=marker + "-", color=color, capsize=3,
                    label="extentdb" if e == "extentdb" else "PostgreSQL")
    ax.set_xscale("log", base=2)
    ax.set_xticks([f["connections"] for f in figs])
    ax.set_xticklabels([str(f["connections"]) for f in figs])
    ax.set_ylim(bottom=0)
    label(ax, "connections", figs[0]["unit"], name)


def sec_concurrency(c, figdir):
    """Issue 21's concurrency chart: throughput against connections, one panel per workload."""
    names = list(dict.fromkeys(f["name"] for f in c["figures"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.8), squeeze=False)
    engines = [("extentdb", ON, "o"), ("postgres", PEER, "s")]
    for ax, name in zip(axes[0], names):
        _conc_panel(ax, name, [f for f in c["figures"] if f["name"] == name], engines)
    chart = _save(fig, figdir, "concurrency.png")
    cfg = c["config"]
    sc = cfg.get("tpcb_scale") or {}
    rows = []
    for f in c["figures"]:
        x, p = f["engines"]["extentdb"], f["engines"].get("postgres")
        v = f.get("ratio_extentdb_to_postgres")
        rows.append([f["name"], f["connections"], f["unit"], _conc_rate(x), _conc_rate(p),
                     "-" if v is None else fmt_x(v),
                     f"{x.get('retries', 0)} / {p.get('retries', 0) if p else '-'}",
                     *_conc_cpu_cells(x, p)])
    checks = "; ".join(f"{e}: inserts {'ok' if ch.get('ins_ok') else '**NOT ok**'}, TPC-B "
                       f"{'ok' if ch.get('tpcb_ok') else '**NOT ok**'} "
                       f"({ch.get('tpcb_committed_by_client', 0):,} transactions)"
                       for e, ch in c["checks"].items())
    md = ["## Sessions side by side (bench/wire.py --family concurrency)",
          f"One Go client over TCP on loopback, every statement prepared with parameters; "
          f"{cfg['rounds']} rounds of {cfg['seconds_per_run']:g} s per figure, the engines "
          f"alternating which runs first; medians with the rounds' range. kv holds "
          f"{cfg['table_rows']:,} rows; TPC-B: {sc.get('branches')} branches, "
          f"{sc.get('tellers_per_branch')} tellers and {sc.get('accounts_per_branch'):,} "
          "accounts a branch. Retries: TPC-B transactions run again after a deadlock. CPU "
          "per operation (medians, microseconds): each server's utime + stime over its "
          "processes and the client's own, over each run's timed part; the client and the "
          "server share this machine's cores, so the rate is bounded by their sum "
          "(docs/BENCHMARKS.md).",
          table(["workload", "conns", "unit", "extentdb median [min-max]",
                 "PostgreSQL median [min-max]", "extentdb / PG", "retries (extentdb / PG)",
                 "server CPU us/op (extentdb / PG)", "server CPU extentdb / PG",
                 "client CPU us/op (extentdb / PG)"], rows),
          f"Checks after the runs: {checks}.",
          f"![concurrency]({os.path.basename(figdir)}/{chart})"]
    return "\n\n".join(md), [chart]


def render(res, out, stamp):
    figdir = os.path.join(out, stamp)
    os.makedirs(figdir, exist_ok=True)
    p = res["parts"]
    mi = res["machine_info"]
    sections = []
    machine = p.get("machine")
    if machine:
        sections.append(sec_machine(machine))
    if "seed001" in p:
        sections.append(sec_seed001(p["seed001"], figdir, machine))
    if "seed002" in p:
        sections.append(sec_seed002(p["seed002"], figdir))
    if "seed003" in p:
        sections.append(sec_seed003(p["seed003"], figdir, machine))
    if "seed004" in p:
        sections.append(sec_seed004(p["seed004"], figdir))
    if "checkdb" in p:
        sections.append(sec_checkdb(p["checkdb"], figdir))
    if "backup" in p:
        sections.append(sec_backup(p["backup"]))
    if "peers" in p:
        sections.append(sec_peers(p["peers"], figdir, p.get("backup")))
    if "memory" in p:
        sections.append(sec_memory(p["memory"]))
    if "concurrency" in p:
        sections.append(sec_concurrency(p["concurrency"], figdir))
    mode = "quick mode" if res["quick"] else f"size factor {res['size_factor']:g}"
    head = [f"# extentdb benchmark report: {res['host']}, {res['date'][:10]} ({mode})",
            f"Produced by `python3 bench/report.py{' --quick' if res['quick'] else ''}"
            f"{'' if res['quick'] or res['size_factor'] == 1 else ' --size-factor ' + format(res['size_factor'], 'g')}` "
            f"in {res['elapsed_s'] / 60:.1f} minutes; every figure was measured in that one run"
            f"{' (or in the --merge run named below, which replaced those parts)' if res.get('rerun') else ''}"
            ", and every ratio is against a baseline from the same run. Raw figures: "
            f"[`{stamp}.json`]({stamp}.json).",
            f"Machine: {mi['cpu']}, {mi['nproc']} cores, {mi['mem_gib']} GiB; "
            f"`{mi['uname'].split()[2]}`; scratch file system: `{mi['df'].splitlines()[-1].split()[1]}`; "
            f"extentdb commit `{mi['extentdb_commit'][:10]}`{' (with local changes)' if mi['extentdb_tree_dirty'] else ''}."
            + "".join(f" Run again later with `--merge` ({r['date']}, commit "
                      f"`{r['machine_info']['extentdb_commit'][:10]}`): {', '.join(r['parts'])}."
                      for r in res.get("rerun", [])),
            *([f"**Parts that failed in this run** (see the JSON): {', '.join(res['failed_parts'])}."]
              if res.get("failed_parts") else []),
            *[f"Note: {n}" for n in res.get("notes", [])],
            "Gates (the quick mode's regression checks, ratios from this run):",
            table(["gate", "value", "limit", "held"],
                  [[g["gate"], g["value"], f"{g['kind']} {g['limit']}", "yes" if g["held"] else "**NO**"]
                   for g in res["gates"]])]
    md = "\n\n".join(head + [s[0] for s in sections]) + "\n"
    path = os.path.join(out, f"{stamp}.md")
    with open(path, "w") as f:
        f.write(md)
    return path


if __name__ == "__main__":
    src = sys.argv[1]
    with open(src) as f:
        r = json.load(f)
    print(render(r, os.path.dirname(os.path.abspath(src)), os.path.basename(src)[:-5]))
