#!/bin/bash
# The server's CPU per request in the steady state of one workload of bench/wire/'s
# concurrency family (docs/BENCHMARKS.md, "What a small request costs"): a fresh instance
# and `bench` database made as bench/wire.py makes them, the harness run alone for 16 s,
# the server's utime + stime read from /proc/PID/stat 9 s and 15 s into the run, divided
# by the requests of those 6 s at the run's rate. Needs Go; prints one line.
#
# Usage: bench/request_cpu.sh BINARY WORKLOAD CONNS   (e.g. target/release/extentdb point_select 8)
set -e
BIN=$(realpath "$1"); W=$2; C=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$ROOT/bench/tmp"
HARNESS="$ROOT/bench/tmp/wire-harness"
(cd "$ROOT/bench/wire" && go build -o "$HARNESS" .)
D=$(mktemp -d "$ROOT/bench/tmp/cpu-XXXX")
PW='Yuk0n!River'
PORT=$((20000 + RANDOM % 20000))
"$BIN" setup --data-dir "$D/xdb" --tempdb-files 1 --sa-password "$PW" >/dev/null
MSSQL_SA_PASSWORD="$PW" "$BIN" serve --data-dir "$D/xdb" --listen 127.0.0.1:$PORT >"$D/serve.log" 2>&1 &
SPID=$!
sleep 1.5
"$BIN" sqlcmd -S 127.0.0.1,$PORT -P "$PW" -b -Q "CREATE DATABASE bench ON (NAME = bench, \
FILENAME = 'bench.mdf', SIZE = 2GB, FILEGROWTH = 1GB) LOG ON (NAME = bench_log, \
FILENAME = 'bench_log.ldf', SIZE = 1GB, FILEGROWTH = 512MB)" >/dev/null
"$HARNESS" -xdb "sqlserver://sa:Yuk0n%21River@127.0.0.1:$PORT?database=bench&encrypt=disable" \
  -seconds 16 -rounds 1 -rows 10000 -family concurrency -only "$W" -conns "$C" \
  -tpcb-accounts 1000 >"$D/out.json" 2>"$D/err.txt" &
HP=$!
sleep 9
T0=$(awk '{print $14+$15}' /proc/$SPID/stat); N0=$(date +%s.%N)
sleep 6
T1=$(awk '{print $14+$15}' /proc/$SPID/stat); N1=$(date +%s.%N)
wait $HP
kill $SPID; wait $SPID 2>/dev/null || true
python3 - "$D/out.json" "$T0" "$T1" "$N0" "$N1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t0, t1, n0, n1, hz = (float(x) for x in sys.argv[2:7])
f = r["figures"][0]
rate = f["engines"]["extentdb"]["median"]
cpu_s = (t1 - t0) / hz
print(f"{f['name']} {f['connections']} conn: rate {rate:,.0f}/s, server CPU {cpu_s:.2f} s "
      f"over {n1 - n0:.1f} s = {1e6 * cpu_s / (rate * (n1 - n0)):.1f} us per request")
PY
rm -rf "$D"
