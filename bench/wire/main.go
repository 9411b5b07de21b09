// Command wire drives extentdb and PostgreSQL over TCP with the same client: Go's
// database/sql, go-mssqldb for extentdb (TDS) and pgx's stdlib driver for PostgreSQL, the same
// statements (only the placeholder spelled $1 or @p1), the same keys (one seeded random
// permutation), the same rows, rounds interleaved in alternating order (extentdb first in
// even rounds, PostgreSQL first in odd ones). It prints one JSON document on stdout;
// bench/wire.py starts the servers, runs it and writes the results file. -family picks the
// workloads: wire (issue 20's statements, below) or concurrency (issue 21's four workloads at
// 1, 2, 4 and 8 connections, concurrency.go). Without -pg it drives extentdb alone.
//
// Each figure is an operation rate (operations per second of wall time, all connections
// together) per round; the JSON holds every round, the median, the minimum and the maximum,
// and the ratio of the medians extentdb / PostgreSQL. Memory: before each workload the peak
// resident set of every server process is reset (writing 5 to /proc/PID/clear_refs) and at
// the end of each run, connections still open, VmHWM is read from /proc/PID/status; the
// proportional set size (Pss, /proc/PID/smaps_rollup) summed over each engine's processes is
// sampled every 200 ms as well, since PostgreSQL is many processes sharing memory. CPU: with
// the engine's pid, each run records the server's and this client's CPU time over its timed
// part and per operation, and each figure their medians (cpu.go).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/microsoft/go-mssqldb"
)

// engine is one server under test.
type engine struct {
	Name  string
	db    *sql.DB
	pid   int  // the server process (PostgreSQL: the postmaster)
	multi bool // count the server's child processes too
	tsql  bool // T-SQL placeholders (@p1) instead of $1
	// Transactions run again after a deadlock or serialization failure, in the current run.
	retries atomic.Int64
}

// sqlText spells a statement written with $N placeholders for the engine.
func (e *engine) sqlText(q string) string {
	if !e.tsql {
		return q
	}
	for i := 9; i >= 1; i-- {
		q = strings.ReplaceAll(q, "$"+strconv.Itoa(i), "@p"+strconv.Itoa(i))
	}
	return q
}

// ---------------------------------------------------------------- memory

func readStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return fieldKB(string(b), field)
}

func fieldKB(text, field string) int64 {
	for _, ln := range strings.Split(text, "\n") {
		if strings.HasPrefix(ln, field+":") {
			f := strings.Fields(ln[len(field)+1:])
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// pids lists the engine's server process and, for a multi-process server, its children.
func (e *engine) pids() []int {
	if e.pid == 0 {
		return nil
	}
	out := []int{e.pid}
	if !e.multi {
		return out
	}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		p, err := strconv.Atoi(d.Name())
		if err != nil || p == e.pid {
			continue
		}
		f, err := readStat(p)
		if err != nil {
			continue
		}
		if pp, _ := strconv.Atoi(f[1]); pp == e.pid {
			out = append(out, p)
		}
	}
	return out
}

// resetPeak resets the peak RSS of every process of the engine; false if the kernel refused.
func (e *engine) resetPeak() bool {
	ok := true
	for _, p := range e.pids() {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0); err != nil {
			ok = false
		}
	}
	return ok
}

// hwm returns the sum of VmHWM over the engine's processes and the largest single VmHWM (KiB).
func (e *engine) hwm() (sum, max int64) {
	for _, p := range e.pids() {
		v := readStatusKB(p, "VmHWM")
		sum += v
		if v > max {
			max = v
		}
	}
	return
}

func (e *engine) pss() int64 {
	var sum int64
	for _, p := range e.pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		sum += fieldKB(string(b), "Pss")
	}
	return sum
}

// sampler records the largest Pss sum seen while it runs.
type sampler struct {
	stop chan struct{}
	done chan struct{}
	peak int64
}

func startSampler(e *engine) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		// Its own thread, so that its /proc reads are measured apart from the client's work.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			var v int64
			timedSample(func() { v = e.pss() })
			if v > s.peak {
				s.peak = v
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() int64 {
	close(s.stop)
	<-s.done
	return s.peak
}

// ---------------------------------------------------------------- workloads

// op runs one operation on a pinned connection; seq counts the worker's operations.
type op func(ctx context.Context, seq int) error

// workload prepares a worker's operation on its connection.
type workload struct {
	Name    string
	Unit    string
	SQL     string
	Conns   int
	Count   int // >0: a fixed number of operations (the whole run in one transaction)
	prepare func(ctx context.Context, e *engine, c *sql.Conn, round, worker, conns int) (op, func() error, error)
}

type run struct {
	Round   int     `json:"round"`
	Ops     int64   `json:"ops"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	// Position of this engine in the round (0 = ran first).
	Position int `json:"position"`
	// Transactions run again after a deadlock victim's or serialization failure's error.
	Retries int64 `json:"retries,omitempty"`
	// CPU over the timed part (cpu.go), when the engine's pid is known.
	ServerCPUSecs  *float64 `json:"server_cpu_s,omitempty"`
	ClientCPUSecs  *float64 `json:"client_cpu_s,omitempty"`
	ServerCPUPerOp *float64 `json:"server_cpu_us_per_op,omitempty"`
	ClientCPUPerOp *float64 `json:"client_cpu_us_per_op,omitempty"`
	// The harness's memory sampling (both engines') over the run, left out of client_cpu_s.
	SamplerCPUSecs *float64 `json:"sampler_cpu_s,omitempty"`
}

type engineResult struct {
	Runs       []run   `json:"runs"`
	Median     float64 `json:"median"`
	Min        float64 `json:"min"`
	Max        float64 `json:"max"`
	Error      string  `json:"error,omitempty"`
	VmHWMSumKB int64   `json:"vmhwm_sum_kb"`
	VmHWMMaxKB int64   `json:"vmhwm_max_process_kb"`
	Processes  int     `json:"processes"`
	PssPeakKB  int64   `json:"pss_peak_sampled_kb"`
	PeakReset  bool    `json:"peak_reset"`
	Retries    int64   `json:"retries,omitempty"`
	// Medians of the runs' CPU per operation (microseconds), when measured.
	ServerCPUPerOpMedian *float64 `json:"server_cpu_us_per_op_median,omitempty"`
	ClientCPUPerOpMedian *float64 `json:"client_cpu_us_per_op_median,omitempty"`
}

type figure struct {
	Name    string                   `json:"name"`
	Conns   int                      `json:"connections"`
	Unit    string                   `json:"unit"`
	SQL     string                   `json:"sql"`
	Count   int                      `json:"operations_per_run,omitempty"`
	Engines map[string]*engineResult `json:"engines"`
	Ratio   *float64                 `json:"ratio_extentdb_to_postgres"`
	Failed  bool                     `json:"failed"`
	// Bare pwrite + fdatasync loops per second, one per round, for the commit-bound figures:
	// 512-byte and 8 KiB writes.
	SyncBaseline512 []float64 `json:"fdatasync_loop_512b_per_s,omitempty"`
	SyncBaseline8K  []float64 `json:"fdatasync_loop_8k_per_s,omitempty"`
	WallSecs        float64   `json:"wall_seconds"`
}

// runOnce runs workload w on engine e for dur (or w.Count operations) with w.Conns pinned
// connections, all prepared before the clock starts. It returns the operation count and the
// wall time from the start signal to the last worker's end, reads the CPU meter (nil: none)
// around that time, and calls atEnd (memory readings) before the connections close.
func runOnce(e *engine, w *workload, round int, dur time.Duration, m *cpuMeter, atEnd func()) (int64, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dur+10*time.Minute)
	defer cancel()
	type worker struct {
		c     *sql.Conn
		f     op
		close func() error
	}
	ws := make([]worker, w.Conns)
	defer func() {
		for _, x := range ws {
			if x.close != nil {
				x.close()
			}
			if x.c != nil {
				x.c.Close()
			}
		}
	}()
	for i := range ws {
		c, err := e.db.Conn(ctx)
		if err != nil {
			return 0, 0, err
		}
		ws[i].c = c
		f, cl, err := w.prepare(ctx, e, c, round, i, w.Conns)
		if err != nil {
			return 0, 0, err
		}
		ws[i].f, ws[i].close = f, cl
	}
	var total int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	var deadline time.Time
	for i := range ws {
		wg.Add(1)
		go func(x worker) {
			defer wg.Done()
			<-start
			n := 0
			for {
				if w.Count > 0 {
					if n >= w.Count/w.Conns {
						break
					}
				} else if !time.Now().Before(deadline) {
					break
				}
				if err := x.f(ctx, n); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				n++
			}
			atomic.AddInt64(&total, int64(n))
		}(ws[i])
	}
	m.start()
	t0 := time.Now()
	deadline = t0.Add(dur)
	close(start)
	wg.Wait()
	// The bulk load's COMMIT belongs to its time: close (commit) before the clock stops.
	if w.Count > 0 {
		for i := range ws {
			if ws[i].close != nil {
				if err := ws[i].close(); err != nil && firstErr == nil {
					firstErr = err
				}
				ws[i].close = nil
			}
		}
	}
	secs := time.Since(t0).Seconds()
	m.stop()
	if atEnd != nil {
		atEnd()
	}
	return total, secs, firstErr
}

// syncLoop is the durable-commit baseline measured in the same rounds: a bare loop of a
// pwrite of block bytes at the next offset and an fdatasync, on a file of written zeros in dir
// (both engines' files are on the same file system), for dur; returns loops per second.
// extentdb writes its log in 512-byte sectors, PostgreSQL its WAL in 8 KiB pages.
func syncLoop(dir string, dur time.Duration, block int) (float64, error) {
	p := filepath.Join(dir, "wire-sync-baseline.bin")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(p)
	defer f.Close()
	const size = 8 << 20
	if _, err := f.Write(make([]byte, size)); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	buf := make([]byte, block)
	n := 0
	t0 := time.Now()
	for time.Since(t0) < dur {
		if _, err := f.WriteAt(buf, int64(n*block%size)); err != nil {
			return 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ---------------------------------------------------------------- main

type config struct {
	Seconds     float64    `json:"seconds_per_run"`
	Rounds      int        `json:"rounds"`
	Rows        int        `json:"table_rows"`
	BulkRows    int        `json:"bulk_rows"`
	Seed        int64      `json:"key_seed"`
	Family      string     `json:"family"`
	Conns       []int      `json:"connections"`
	TPCB        *tpcbScale `json:"tpcb_scale,omitempty"`
	Only        string     `json:"only,omitempty"`
	GoVersion   string     `json:"go_client"`
	PadChars    int        `json:"pad_chars"`
	Description string     `json:"description"`
}

// parseConns reads -conns, or gives the family's default.
func parseConns(list, family string) []int {
	if list == "" {
		if family == "concurrency" {
			return []int{1, 2, 4, 8}
		}
		// The wire and index families.
		return []int{1, 8}
	}
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 255 {
			fmt.Fprintf(os.Stderr, "-conns: %q is not a connection count of 1 to 255\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	xdbDSN := flag.String("xdb", "", "go-mssqldb DSN of extentdb")
	pgDSN := flag.String("pg", "", "pgx DSN of PostgreSQL")
	xdbPID := flag.Int("xdb-pid", 0, "extentdb server process id (memory and CPU readings)")
	pgPID := flag.Int("pg-pid", 0, "PostgreSQL postmaster process id (memory and CPU readings)")
	seconds := flag.Float64("seconds", 5, "seconds per timed run")
	rounds := flag.Int("rounds", 5, "rounds per figure (engines alternate which runs first)")
	rows := flag.Int("rows", 10000, "rows of the table for point lookups, updates and scans")
	bulk := flag.Int("bulk-rows", 10000, "rows per bulk load (one transaction)")
	seed := flag.Int64("seed", 20261125, "seed of the key permutation")
	only := flag.String("only", "", "comma-separated workload names to run (default all)")
	syncDir := flag.String("sync-dir", "", "directory on the servers' file system for the fdatasync baseline (none if empty)")
	family := flag.String("family", "wire", "wire (the statements of issue 20), concurrency (issue 21: four workloads at 1, 2, 4 and 8 connections) or index (issue 22: lookups through a nonclustered index)")
	connList := flag.String("conns", "", "comma-separated connection counts (default 1,8 for wire, 1,2,4,8 for concurrency)")
	branches := flag.Int("tpcb-branches", 8, "TPC-B branches (10 tellers each)")
	accounts := flag.Int("tpcb-accounts", 10000, "TPC-B accounts per branch (pgbench: 100,000)")
	flag.Parse()
	if *xdbDSN == "" || (*family != "wire" && *family != "concurrency" && *family != "index") {
		fmt.Fprintln(os.Stderr, "usage: wire -xdb DSN [-pg DSN] [-family wire|concurrency|index] [-conns 1,2,4,8] [-xdb-pid P -pg-pid P] [-seconds S] [-rounds R] [-rows N] [-bulk-rows N]")
		os.Exit(2)
	}
	const pad = 200
	cfg := config{Seconds: *seconds, Rounds: *rounds, Rows: *rows, BulkRows: *bulk, Seed: *seed,
		Family: *family, Conns: parseConns(*connList, *family), Only: *only, PadChars: pad,
		GoVersion:   runtime.Version(),
		Description: "database/sql; go-mssqldb (extentdb) and pgx stdlib (PostgreSQL) over TCP on 127.0.0.1"}
	scale := tpcbScale{Branches: *branches, TellersPerBranch: tellersPerBranch, AccountsPerBranch: *accounts}
	if *family == "concurrency" {
		cfg.TPCB = &scale
	}
	open := func(driver, dsn string) *sql.DB {
		db, err := sql.Open(driver, dsn)
		must(err, "open "+driver)
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		db.SetConnMaxLifetime(0)
		must(db.Ping(), "connect "+driver)
		return db
	}
	xdb := &engine{Name: "extentdb", db: open("sqlserver", *xdbDSN), pid: *xdbPID, tsql: true}
	engines := []*engine{xdb}
	if *pgDSN != "" {
		engines = append(engines, &engine{Name: "postgres", db: open("pgx", *pgDSN), pid: *pgPID, multi: true})
	}
	ctx := context.Background()

	// The keys: one random permutation of 1..rows shared by both engines (and of 1..bulk for
	// the bulk load's keys).
	rng := rand.New(rand.NewSource(*seed))
	perm := rng.Perm(*rows)
	bulkPerm := rng.Perm(*bulk)
	padOf := func(k int) string {
		s := fmt.Sprintf("row %d ", k)
		return s + strings.Repeat("x", pad-len(s))
	}

	// Setup, untimed: the seed's table and the key table, DDL spelled for each engine.
	ddl := map[string][]string{
		"extentdb": {
			"CREATE TABLE bigrows (c1 INT IDENTITY, c2 CHAR(8000) DEFAULT 'a')",
			"CREATE TABLE kv (k INT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL)",
		},
		"postgres": {
			"DROP TABLE IF EXISTS bigrows, kv",
			"CREATE TABLE bigrows (c1 INT GENERATED BY DEFAULT AS IDENTITY, c2 CHAR(8000) DEFAULT 'a')",
			"CREATE TABLE kv (k INT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL)",
		},
	}
	insertKV := "INSERT INTO kv (k, x, pad) VALUES ($1, $2, $3)"
	for _, e := range engines {
		for _, q := range ddl[e.Name] {
			_, err := e.db.ExecContext(ctx, q)
			must(err, e.Name+": "+q)
		}
		if *family == "index" {
			must(setupIndexes(ctx, e, perm, sOf(*rows, *seed)), e.Name+": index table")
			continue
		}
		// The key table, loaded in one transaction through the same prepared INSERT as
		// the bulk workload, in the permutation's order.
		tx, err := e.db.BeginTx(ctx, nil)
		must(err, e.Name+": begin")
		st, err := tx.PrepareContext(ctx, e.sqlText(insertKV))
		must(err, e.Name+": prepare")
		for _, i := range perm {
			k := i + 1
			_, err := st.ExecContext(ctx, k, k%1000, padOf(k))
			must(err, e.Name+": load kv")
		}
		st.Close()
		must(tx.Commit(), e.Name+": commit kv")
		var n int64
		must(e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kv").Scan(&n), e.Name+": count kv")
		if n != int64(*rows) {
			fmt.Fprintf(os.Stderr, "%s: kv holds %d rows, expected %d\n", e.Name, n, *rows)
			os.Exit(1)
		}
		if *family == "concurrency" {
			must(setupConcurrency(ctx, e, scale), e.Name+": concurrency tables")
		}
	}

	// key returns the key a worker uses at its seq-th operation in a round: each worker walks
	// the permutation from its own offset, the offsets moving with the round.
	key := func(round, worker, conns, seq int) int {
		off := (round*7919 + worker*(*rows/conns)) % *rows
		return perm[(off+seq)%*rows] + 1
	}

	stmtOp := func(q string, args func(round, worker, conns, seq int) []any, scan int) func(context.Context, *engine, *sql.Conn, int, int, int) (op, func() error, error) {
		return func(ctx context.Context, e *engine, c *sql.Conn, round, worker, conns int) (op, func() error, error) {
			st, err := c.PrepareContext(ctx, e.sqlText(q))
			if err != nil {
				return nil, nil, err
			}
			f := func(ctx context.Context, seq int) error {
				var a []any
				if args != nil {
					a = args(round, worker, conns, seq)
				}
				if scan == 0 {
					_, err := st.ExecContext(ctx, a...)
					return err
				}
				r, err := st.QueryContext(ctx, a...)
				if err != nil {
					return err
				}
				got := 0
				for r.Next() {
					got++
				}
				if err := r.Err(); err != nil {
					r.Close()
					return err
				}
				r.Close()
				if got != scan {
					return fmt.Errorf("%d rows returned, expected %d", got, scan)
				}
				return nil
			}
			return f, st.Close, nil
		}
	}
	byKey := func(round, worker, conns, seq int) []any { return []any{key(round, worker, conns, seq)} }

	var workloads []*workload
	add := func(w workload, conns []int) {
		for _, c := range conns {
			x := w
			x.Conns = c
			workloads = append(workloads, &x)
		}
	}
	pointSelect := workload{Name: "point_select", Unit: "queries/s", SQL: "SELECT x, pad FROM kv WHERE k = $1",
		prepare: stmtOp("SELECT x, pad FROM kv WHERE k = $1", byKey, 1)}
	updateByKey := workload{Name: "update_by_key", Unit: "updates/s", SQL: "UPDATE kv SET x = x + 1 WHERE k = $1",
		prepare: stmtOp("UPDATE kv SET x = x + 1 WHERE k = $1", byKey, 0)}
	if *family == "index" {
		add(workload{Name: "point_clustered", Unit: "queries/s", SQL: "SELECT x, pad FROM ix WHERE k = $1",
			prepare: stmtOp("SELECT x, pad FROM ix WHERE k = $1", byKey, 1)}, cfg.Conns)
		add(workload{Name: "point_index", Unit: "queries/s", SQL: "SELECT x, pad FROM ix WHERE s = $1 (nonclustered index on s)",
			prepare: stmtOp("SELECT x, pad FROM ix WHERE s = $1", byKey, 1)}, cfg.Conns)
		width := *rows / 100
		byRange := func(round, worker, conns, seq int) []any {
			lo := key(round, worker, conns, seq) % (*rows - width + 1)
			return []any{lo + 1, lo + width}
		}
		add(workload{Name: "range_index_1pct", Unit: "queries/s",
			SQL:     fmt.Sprintf("SELECT COUNT(*), SUM(x) FROM ix WHERE s BETWEEN $1 AND $2 (%d rows through the index)", width),
			prepare: stmtOp("SELECT COUNT(*), SUM(x) FROM ix WHERE s BETWEEN $1 AND $2", byRange, 1)}, []int{1})
		byY := func(round, worker, conns, seq int) []any { return []any{key(round, worker, conns, seq) % 1000} }
		joinSQL := "SELECT COUNT(*), SUM(ix.x) FROM iy JOIN ix ON ix.k = iy.ixk WHERE iy.y = $1"
		add(workload{Name: "join_selective", Unit: "queries/s",
			SQL:     fmt.Sprintf("%s (%d x %d rows, %d joined)", joinSQL, *rows/10, *rows, *rows/10/1000),
			prepare: stmtOp(joinSQL, byY, 1)}, []int{1})
		groupSQL := "SELECT x % 100, COUNT(*), SUM(CAST(s AS BIGINT)) FROM ix GROUP BY x % 100"
		add(workload{Name: "group_by_whole", Unit: "queries/s", SQL: groupSQL + " (100 groups)",
			prepare: stmtOp(groupSQL, nil, 100)}, []int{1})
		countSQL := "SELECT COUNT(*), SUM(CAST(x AS BIGINT)) FROM ix"
		add(workload{Name: "count_sum_whole", Unit: "queries/s", SQL: countSQL,
			prepare: stmtOp(countSQL, nil, 1)}, []int{1})
	} else if *family == "concurrency" {
		add(pointSelect, cfg.Conns)
		add(updateByKey, cfg.Conns)
		add(workload{Name: "insert_clustered", Unit: "rows/s",
			SQL:     "INSERT INTO ins (k, x, pad) VALUES ($1, $2, $3) (autocommit; keys disjoint per connection)",
			prepare: insertClustered}, cfg.Conns)
		add(workload{Name: "tpcb", Unit: "transactions/s",
			SQL:     "BEGIN TRANSACTION; " + strings.Join(tpcbStatements, "; ") + "; COMMIT TRANSACTION",
			prepare: tpcbPrepare(scale, *seed)}, cfg.Conns)
	} else {
		add(workload{Name: "select1", Unit: "queries/s", SQL: "SELECT 1",
			prepare: stmtOp("SELECT 1", nil, 1)}, cfg.Conns)
		add(workload{Name: "seed004_insert", Unit: "rows/s", SQL: "INSERT INTO bigrows DEFAULT VALUES",
			prepare: stmtOp("INSERT INTO bigrows DEFAULT VALUES", nil, 0)}, cfg.Conns)
		bulkSQL := "INSERT INTO load_r (k, x, pad) VALUES ($1, $2, $3)"
		add(workload{Name: "bulk_load", Unit: "rows/s", SQL: bulkSQL + " (prepared; all rows in one transaction)",
			Count: *bulk,
			prepare: func(ctx context.Context, e *engine, c *sql.Conn, round, worker, conns int) (op, func() error, error) {
				tbl := fmt.Sprintf("load_%d", round)
				if e.Name == "postgres" {
					if _, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+tbl); err != nil {
						return nil, nil, err
					}
				}
				if _, err := c.ExecContext(ctx, "CREATE TABLE "+tbl+" (k INT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL)"); err != nil {
					return nil, nil, err
				}
				tx, err := c.BeginTx(ctx, nil)
				if err != nil {
					return nil, nil, err
				}
				st, err := tx.PrepareContext(ctx, e.sqlText(strings.Replace(bulkSQL, "load_r", tbl, 1)))
				if err != nil {
					tx.Rollback()
					return nil, nil, err
				}
				f := func(ctx context.Context, seq int) error {
					k := bulkPerm[seq] + 1
					_, err := st.ExecContext(ctx, k, k%1000, padOf(k))
					return err
				}
				done := false
				cl := func() error {
					if done {
						return nil
					}
					done = true
					st.Close()
					return tx.Commit()
				}
				return f, cl, nil
			}}, []int{1})
		add(pointSelect, cfg.Conns)
		add(updateByKey, cfg.Conns)
		add(workload{Name: "scan_aggregate", Unit: "scans/s", SQL: "SELECT COUNT(*), SUM(x) FROM kv",
			prepare: stmtOp("SELECT COUNT(*), SUM(x) FROM kv", nil, 1)}, []int{1})
	}

	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	dur := time.Duration(*seconds * float64(time.Second))
	// USER_HZ, read once, when some engine's CPU is measured.
	var hz float64
	if *xdbPID != 0 || *pgPID != 0 {
		v, err := clockTicks()
		must(err, "USER_HZ from /proc/self/auxv")
		hz = v
	}
	var figures []*figure
	// Operations each engine acknowledged, by workload (the row checks compare them).
	counted := map[string]map[string]int64{}
	for _, w := range workloads {
		if len(want) > 0 && !want[w.Name] {
			continue
		}
		t0 := time.Now()
		fig := &figure{Name: w.Name, Conns: w.Conns, Unit: w.Unit, SQL: w.SQL, Count: w.Count,
			Engines: map[string]*engineResult{}}
		samplers := map[string]*sampler{}
		for _, e := range engines {
			r := &engineResult{PeakReset: e.resetPeak()}
			fig.Engines[e.Name] = r
			samplers[e.Name] = startSampler(e)
		}
		for round := 0; round < *rounds; round++ {
			// extentdb first in even rounds (counted from 0), last in odd ones.
			order := append([]*engine(nil), engines...)
			if round%2 == 1 {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			if *syncDir != "" && w.Conns == 1 && (w.Name == "seed004_insert" || w.Name == "update_by_key") {
				v, err := syncLoop(*syncDir, time.Second, 512)
				must(err, "fdatasync baseline")
				v8, err := syncLoop(*syncDir, time.Second, 8192)
				must(err, "fdatasync baseline")
				fig.SyncBaseline512 = append(fig.SyncBaseline512, v)
				fig.SyncBaseline8K = append(fig.SyncBaseline8K, v8)
				fmt.Fprintf(os.Stderr, "round %d %-15s bare pwrite+fdatasync loop: 512 B %10.1f /s, 8 KiB %10.1f /s\n", round+1, w.Name, v, v8)
			}
			for pos, e := range order {
				r := fig.Engines[e.Name]
				if r.Error != "" {
					continue
				}
				atEnd := func() {
					s, m := e.hwm()
					if s > r.VmHWMSumKB {
						r.VmHWMSumKB = s
					}
					if m > r.VmHWMMaxKB {
						r.VmHWMMaxKB = m
					}
					r.Processes = len(e.pids())
				}
				e.retries.Store(0)
				m := newCPUMeter(e, hz)
				ops, secs, err := runOnce(e, w, round, dur, m, atEnd)
				retries := e.retries.Swap(0)
				r.Retries += retries
				if counted[w.Name] == nil {
					counted[w.Name] = map[string]int64{}
				}
				// Acknowledged operations count even in a run that then failed.
				counted[w.Name][e.Name] += ops
				if err != nil {
					r.Error = err.Error()
					fmt.Fprintf(os.Stderr, "%s %d conn: %s FAILED: %v\n", w.Name, w.Conns, e.Name, err)
					continue
				}
				x := run{Round: round + 1, Ops: ops, Seconds: secs, Rate: float64(ops) / secs, Position: pos, Retries: retries}
				m.record(&x)
				r.Runs = append(r.Runs, x)
				fmt.Fprintf(os.Stderr, "round %d %-16s %d conn: %-8s %12.1f %s (%d in %.2f s, %d retries)%s\n",
					round+1, w.Name, w.Conns, e.Name, x.Rate, w.Unit, ops, secs, retries, cpuNote(x))
			}
		}
		for _, e := range engines {
			r := fig.Engines[e.Name]
			r.PssPeakKB = samplers[e.Name].finish()
			var rates []float64
			for _, x := range r.Runs {
				rates = append(rates, x.Rate)
			}
			if len(rates) > 0 {
				r.Median = median(rates)
				sort.Float64s(rates)
				r.Min, r.Max = rates[0], rates[len(rates)-1]
			}
			cpuMedians(r)
			if r.Error != "" {
				fig.Failed = true
			}
		}
		a, b := fig.Engines["extentdb"], fig.Engines["postgres"]
		if b != nil && a.Error == "" && b.Error == "" && b.Median > 0 {
			v := a.Median / b.Median
			fig.Ratio = &v
		}
		fig.WallSecs = time.Since(t0).Seconds()
		figures = append(figures, fig)
	}

	// Row checks: what each engine holds against what the client counted.
	checks := map[string]any{}
	for _, e := range engines {
		c := map[string]any{}
		var n, s int64
		if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM bigrows").Scan(&n); err != nil {
			c["bigrows"] = "error: " + err.Error()
		} else {
			c["bigrows_rows"] = n
			c["bigrows_inserted_by_client"] = counted["seed004_insert"][e.Name]
			c["bigrows_ok"] = n == counted["seed004_insert"][e.Name]
		}
		if *family == "index" {
			for k, v := range indexCheck(ctx, e, *rows) {
				c[k] = v
			}
		} else if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(x) FROM kv").Scan(&n, &s); err != nil {
			c["kv"] = "error: " + err.Error()
		} else {
			c["kv_rows"] = n
			c["kv_ok"] = n == int64(*rows)
		}
		if *family == "concurrency" {
			for k, v := range concurrencyChecks(ctx, e, counted["insert_clustered"][e.Name], counted["tpcb"][e.Name], scale) {
				c[k] = v
			}
		}
		checks[e.Name] = c
	}
	out := map[string]any{"config": cfg, "figures": figures, "checks": checks}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	must(enc.Encode(out), "encode")
}
