package main

// The index family (issue 22's benchmark): a point lookup through a nonclustered index
// against one by the clustered key, and a 1% range through the index, on a -rows-row table
// (1,000,000 by default for this family) loaded the same way into both engines; a join of
// a table of a tenth as many rows with it under a selective predicate, a GROUP BY over the
// whole table, and COUNT and SUM over the whole table.

import (
	"context"
	"fmt"
	"math/rand"
)

// indexTable is the family's table: k the clustered key, s a second unique column (a
// random permutation of 1..rows, so k and s orders are unrelated) with a nonclustered
// index, as both engines spell it.
// iy (rows / 10 rows) joins it: ixk a key of ix, y = k % 1000 the selective column (no
// index: a scan of iy finds the rows, each joined to ix by its clustered key).
var indexTable = map[string][]string{
	"extentdb": {
		"CREATE TABLE ix (k INT PRIMARY KEY, s INT NOT NULL, x INT NOT NULL, pad CHAR(100) NOT NULL)",
		"CREATE TABLE iy (k INT PRIMARY KEY, ixk INT NOT NULL, y INT NOT NULL)",
	},
	"postgres": {
		"DROP TABLE IF EXISTS ix",
		"DROP TABLE IF EXISTS iy",
		"CREATE TABLE ix (k INT PRIMARY KEY, s INT NOT NULL, x INT NOT NULL, pad CHAR(100) NOT NULL)",
		"CREATE TABLE iy (k INT PRIMARY KEY, ixk INT NOT NULL, y INT NOT NULL)",
	},
}

// iyRow gives iy's row k (1-based) of a family of `rows` rows: its ixk and y.
func iyRow(k, rows int) (int, int) {
	return (k*7919)%rows + 1, k % 1000
}

// indexBuild runs after the load: the index, and PostgreSQL's statistics (extentdb has none:
// its choice of the index is by the predicate alone).
var indexBuild = map[string][]string{
	"extentdb": {"CREATE INDEX ix_s ON ix (s)"},
	"postgres": {"CREATE INDEX ix_s ON ix (s)", "ANALYZE ix", "ANALYZE iy"},
}

// sOf gives each key its s: a permutation of 1..rows from its own seed.
func sOf(rows int, seed int64) []int {
	p := rand.New(rand.NewSource(seed + 22)).Perm(rows)
	for i := range p {
		p[i]++
	}
	return p
}

// setupIndexes makes and loads the family's table in one transaction through one prepared
// INSERT, keys in `perm`'s order, then builds the index.
func setupIndexes(ctx context.Context, e *engine, perm, s []int) error {
	for _, q := range indexTable[e.Name] {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	st, err := tx.PrepareContext(ctx, e.sqlText("INSERT INTO ix (k, s, x, pad) VALUES ($1, $2, $3, $4)"))
	if err != nil {
		tx.Rollback()
		return err
	}
	for _, i := range perm {
		k := i + 1
		if _, err := st.ExecContext(ctx, k, s[i], k%1000, fmt.Sprintf("row %d", k)); err != nil {
			tx.Rollback()
			return err
		}
	}
	st.Close()
	iy, err := tx.PrepareContext(ctx, e.sqlText("INSERT INTO iy (k, ixk, y) VALUES ($1, $2, $3)"))
	if err != nil {
		tx.Rollback()
		return err
	}
	for k := 1; k <= len(perm)/10; k++ {
		ixk, y := iyRow(k, len(perm))
		if _, err := iy.ExecContext(ctx, k, ixk, y); err != nil {
			tx.Rollback()
			return err
		}
	}
	iy.Close()
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, q := range indexBuild[e.Name] {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// indexCheck: the table holds every row, and the index finds each s once (a sample).
func indexCheck(ctx context.Context, e *engine, rows int) map[string]any {
	c := map[string]any{}
	var n, sum int64
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(CAST(s AS BIGINT)) FROM ix").Scan(&n, &sum); err != nil {
		c["ix"] = "error: " + err.Error()
		return c
	}
	want := int64(rows) * int64(rows+1) / 2
	c["ix_rows"], c["ix_s_sum"] = n, sum
	c["ix_ok"] = n == int64(rows) && sum == want
	var m int64
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM iy").Scan(&m); err != nil {
		c["iy"] = "error: " + err.Error()
		return c
	}
	c["iy_rows"], c["iy_ok"] = m, m == int64(rows/10)
	return c
}
