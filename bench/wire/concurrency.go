// The concurrency family (issue 21's benchmark): the same four workloads at 1, 2, 4 and 8
// connections, each engine driven by this one client with the same statements and keys.
//
//	point_select      SELECT x, pad FROM kv WHERE k = ? (the wire family's statement)
//	update_by_key     UPDATE kv SET x = x + 1 WHERE k = ?, autocommit (the same)
//	insert_clustered  INSERT INTO ins (k, x, pad) VALUES (?, ?, ?), autocommit, one new row per
//	                  statement into a table clustered on k; each connection inserts its own
//	                  ascending run of keys, disjoint from every other connection's and run's
//	tpcb              pgbench's built-in TPC-B-like transaction, written once here and sent
//	                  with parameters: BEGIN; UPDATE accounts; SELECT abalance; UPDATE tellers;
//	                  UPDATE branches; INSERT history; COMMIT. A deadlock victim (extentdb's
//	                  Msg 1205, PostgreSQL's SQLSTATE 40P01 or 40001) is rolled back and run again
//	                  with the same keys and delta, and counted as a retry.
//
// The TPC-B tables are pgbench's (branches, tellers, accounts, history, with pgbench's filler
// widths) at -tpcb-branches branches, 10 tellers a branch and -tpcb-accounts accounts a
// branch (pgbench's own scale has 100,000: fewer here so both engines load them in seconds).
// After the runs the checks compare what each engine holds with what the client committed:
// the rows of ins against the inserts acknowledged, the history rows against the
// transactions committed, and the TPC-B invariant: the sum of the accounts' balances, of the
// tellers' and of the branches' each equal the sum of the history's deltas.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"

	"github.com/jackc/pgx/v5/pgconn"
	mssql "github.com/microsoft/go-mssqldb"
)

const tellersPerBranch = 10

// tpcbMaxTries bounds the runs of one transaction that keeps being chosen as a victim.
const tpcbMaxTries = 100

// tpcbScale is the size of the TPC-B tables.
type tpcbScale struct {
	Branches          int `json:"branches"`
	TellersPerBranch  int `json:"tellers_per_branch"`
	AccountsPerBranch int `json:"accounts_per_branch"`
}

func (s tpcbScale) accounts() int { return s.Branches * s.AccountsPerBranch }
func (s tpcbScale) tellers() int  { return s.Branches * s.TellersPerBranch }

// concurrencyDDL creates the family's tables, spelled for the engine (only the history's
// timestamp type differs).
func concurrencyDDL(e *engine) []string {
	ts := "DATETIME2"
	var out []string
	if !e.tsql {
		ts = "TIMESTAMP"
		out = append(out, "DROP TABLE IF EXISTS ins, tpcb_branches, tpcb_tellers, tpcb_accounts, tpcb_history")
	}
	return append(out,
		"CREATE TABLE ins (k BIGINT PRIMARY KEY, x INT NOT NULL, pad CHAR(200) NOT NULL)",
		"CREATE TABLE tpcb_branches (bid INT PRIMARY KEY, bbalance INT NOT NULL, filler CHAR(88))",
		"CREATE TABLE tpcb_tellers (tid INT PRIMARY KEY, bid INT NOT NULL, tbalance INT NOT NULL, filler CHAR(84))",
		"CREATE TABLE tpcb_accounts (aid INT PRIMARY KEY, bid INT NOT NULL, abalance INT NOT NULL, filler CHAR(84))",
		"CREATE TABLE tpcb_history (tid INT NOT NULL, bid INT NOT NULL, aid INT NOT NULL, delta INT NOT NULL, mtime "+ts+" NOT NULL, filler CHAR(22))")
}

// loadRows inserts n rows through one prepared statement in one transaction (untimed setup).
func loadRows(ctx context.Context, e *engine, q string, n int, args func(i int) []any) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	st, err := tx.PrepareContext(ctx, e.sqlText(q))
	if err != nil {
		tx.Rollback()
		return err
	}
	for i := 1; i <= n; i++ {
		if _, err := st.ExecContext(ctx, args(i)...); err != nil {
			st.Close()
			tx.Rollback()
			return err
		}
	}
	st.Close()
	return tx.Commit()
}

// setupConcurrency creates and loads the family's tables on the engine.
func setupConcurrency(ctx context.Context, e *engine, s tpcbScale) error {
	for _, q := range concurrencyDDL(e) {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	apb := s.AccountsPerBranch
	loads := []struct {
		q    string
		n    int
		args func(i int) []any
	}{
		{"INSERT INTO tpcb_branches (bid, bbalance) VALUES ($1, 0)", s.Branches,
			func(i int) []any { return []any{i} }},
		{"INSERT INTO tpcb_tellers (tid, bid, tbalance) VALUES ($1, $2, 0)", s.tellers(),
			func(i int) []any { return []any{i, (i-1)/s.TellersPerBranch + 1} }},
		{"INSERT INTO tpcb_accounts (aid, bid, abalance, filler) VALUES ($1, $2, 0, $3)", s.accounts(),
			func(i int) []any { return []any{i, (i-1)/apb + 1, fmt.Sprintf("%84d", i)} }},
	}
	for _, l := range loads {
		if err := loadRows(ctx, e, l.q, l.n, l.args); err != nil {
			return fmt.Errorf("%s: %w", l.q, err)
		}
	}
	return nil
}

// insertKey is the key a worker inserts at its seq-th operation: disjoint between
// connections, rounds and connection counts, ascending within a worker's run.
func insertKey(conns, round, worker, seq int) int64 {
	return int64(conns)<<40 | int64(round)<<32 | int64(worker)<<24 | int64(seq)
}

func insertClustered(ctx context.Context, e *engine, c *sql.Conn, round, worker, conns int) (op, func() error, error) {
	st, err := c.PrepareContext(ctx, e.sqlText("INSERT INTO ins (k, x, pad) VALUES ($1, $2, $3)"))
	if err != nil {
		return nil, nil, err
	}
	pad := fmt.Sprintf("%-200s", fmt.Sprintf("conn %d of %d", worker, conns))
	f := func(ctx context.Context, seq int) error {
		if seq >= 1<<24 {
			return errors.New("insert_clustered: a worker's key run is exhausted")
		}
		_, err := st.ExecContext(ctx, insertKey(conns, round, worker, seq), seq, pad)
		return err
	}
	return f, st.Close, nil
}

// tpcbStatements are pgbench's built-in script's statements, in its order.
var tpcbStatements = []string{
	"UPDATE tpcb_accounts SET abalance = abalance + $1 WHERE aid = $2",
	"SELECT abalance FROM tpcb_accounts WHERE aid = $1",
	"UPDATE tpcb_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
	"UPDATE tpcb_branches SET bbalance = bbalance + $1 WHERE bid = $2",
	"INSERT INTO tpcb_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
}

// tpcbKeys are one transaction's random choices, as pgbench's script draws them.
type tpcbKeys struct{ aid, bid, tid, delta int }

// tpcbWorker runs the transaction on one pinned connection.
type tpcbWorker struct {
	e   *engine
	c   *sql.Conn
	st  []*sql.Stmt
	rng *rand.Rand
	s   tpcbScale
}

// tpcbPrepare returns the workload's prepare function; seed makes a worker's keys the same
// on both engines (one generator per round and worker).
func tpcbPrepare(s tpcbScale, seed int64) func(context.Context, *engine, *sql.Conn, int, int, int) (op, func() error, error) {
	return func(ctx context.Context, e *engine, c *sql.Conn, round, worker, conns int) (op, func() error, error) {
		w := &tpcbWorker{e: e, c: c, s: s,
			rng: rand.New(rand.NewSource(seed + int64(round)*1000003 + int64(worker)*7919 + int64(conns)))}
		closeAll := func() error {
			for _, st := range w.st {
				st.Close()
			}
			return nil
		}
		for _, q := range tpcbStatements {
			st, err := c.PrepareContext(ctx, e.sqlText(q))
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			w.st = append(w.st, st)
		}
		return func(ctx context.Context, _ int) error { return w.transaction(ctx) }, closeAll, nil
	}
}

func (w *tpcbWorker) draw() tpcbKeys {
	return tpcbKeys{aid: w.rng.Intn(w.s.accounts()) + 1, bid: w.rng.Intn(w.s.Branches) + 1,
		tid: w.rng.Intn(w.s.tellers()) + 1, delta: w.rng.Intn(10001) - 5000}
}

// transaction runs one transaction to its commit, retrying a deadlock victim with the same
// keys.
func (w *tpcbWorker) transaction(ctx context.Context) error {
	k := w.draw()
	for try := 1; ; try++ {
		err := w.once(ctx, k)
		if err == nil {
			return nil
		}
		// PostgreSQL keeps a failed transaction open until ROLLBACK; extentdb has already
		// ended a deadlock victim's (Msg 3903 then, ignored), not a failed statement's.
		w.c.ExecContext(ctx, "ROLLBACK TRANSACTION")
		if !retriable(err) || try >= tpcbMaxTries {
			return fmt.Errorf("tpcb (try %d): %w", try, err)
		}
		w.e.retries.Add(1)
	}
}

func (w *tpcbWorker) once(ctx context.Context, k tpcbKeys) error {
	if _, err := w.c.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return err
	}
	if _, err := w.st[0].ExecContext(ctx, k.delta, k.aid); err != nil {
		return err
	}
	var balance int64
	if err := w.st[1].QueryRowContext(ctx, k.aid).Scan(&balance); err != nil {
		return err
	}
	if _, err := w.st[2].ExecContext(ctx, k.delta, k.tid); err != nil {
		return err
	}
	if _, err := w.st[3].ExecContext(ctx, k.delta, k.bid); err != nil {
		return err
	}
	if _, err := w.st[4].ExecContext(ctx, k.tid, k.bid, k.aid, k.delta); err != nil {
		return err
	}
	_, err := w.c.ExecContext(ctx, "COMMIT TRANSACTION")
	return err
}

// retriable tells a deadlock victim or a serialization failure: the transaction is run again.
func retriable(err error) bool {
	var me mssql.Error
	if errors.As(err, &me) {
		return me.Number == 1205
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	return false
}

// scalar reads one BIGINT (NULL as 0) from a query.
func scalar(ctx context.Context, e *engine, q string) (int64, error) {
	var v sql.NullInt64
	err := e.db.QueryRowContext(ctx, q).Scan(&v)
	return v.Int64, err
}

// concurrencyChecks compares what the engine holds with what the client had acknowledged.
func concurrencyChecks(ctx context.Context, e *engine, inserted, committed int64, s tpcbScale) map[string]any {
	c := map[string]any{}
	q := map[string]string{
		"ins_rows":          "SELECT COUNT(*) FROM ins",
		"history_rows":      "SELECT COUNT(*) FROM tpcb_history",
		"history_delta_sum": "SELECT SUM(CAST(delta AS BIGINT)) FROM tpcb_history",
		"accounts_sum":      "SELECT SUM(CAST(abalance AS BIGINT)) FROM tpcb_accounts",
		"tellers_sum":       "SELECT SUM(CAST(tbalance AS BIGINT)) FROM tpcb_tellers",
		"branches_sum":      "SELECT SUM(CAST(bbalance AS BIGINT)) FROM tpcb_branches",
		"accounts_rows":     "SELECT COUNT(*) FROM tpcb_accounts",
	}
	v := map[string]int64{}
	for name, sqlText := range q {
		x, err := scalar(ctx, e, sqlText)
		if err != nil {
			c[name] = "error: " + err.Error()
			c["ins_ok"], c["tpcb_ok"] = false, false
			return c
		}
		v[name] = x
		c[name] = x
	}
	c["ins_inserted_by_client"] = inserted
	c["ins_ok"] = v["ins_rows"] == inserted
	c["tpcb_committed_by_client"] = committed
	c["tpcb_ok"] = v["history_rows"] == committed && v["accounts_rows"] == int64(s.accounts()) &&
		v["accounts_sum"] == v["history_delta_sum"] && v["tellers_sum"] == v["history_delta_sum"] &&
		v["branches_sum"] == v["history_delta_sum"]
	return c
}
