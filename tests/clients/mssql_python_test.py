#!/usr/bin/env python3
"""mssql-python (Microsoft's Python driver, with its own native TDS layer) against
`extentdb serve`: on its defaults with TLS (Encrypt=yes, TrustServerCertificate=yes, as the
instance's certificate is self-signed) and without (Encrypt=no). The driver maps each
server error number to an ODBC SQLSTATE and a DB-API exception class, so the classes below
check the numbers: 208 -> 42S02 ProgrammingError, 8134 -> 22012 DataError, 2627 -> 23000
IntegrityError, 156 -> 42000 ProgrammingError.

Usage: mssql_python_test.py --host H --port P [--password PW]
Prints one line per test and "N passed, M failed"; exits 1 on a failure.
"""
import argparse, datetime, decimal, sys, traceback

import mssql_python

ap = argparse.ArgumentParser()
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--password", default="Str0ng!Pass")
ARGS = ap.parse_args()


class Failure(Exception):
    pass


def eq(got, want, what):
    if got != want:
        raise Failure(f"{what}: got {got!r}, want {want!r}")


def connect(encrypt="yes", database="master"):
    return mssql_python.connect(
        f"Server={ARGS.host},{ARGS.port};Database={database};UID=sa;PWD={ARGS.password};"
        f"Encrypt={encrypt};TrustServerCertificate=yes")


def expect(cur, sql, cls, text):
    try:
        cur.execute(sql)
        cur.fetchall()
    except cls as e:
        if text not in str(e):
            raise Failure(f"{sql}: {e}")
        return
    except Exception as e:  # noqa: BLE001
        raise Failure(f"{sql}: {type(e).__name__} instead of {cls.__name__}: {e}")
    raise Failure(f"{sql}: no error")


TESTS = []


def test(f):
    TESTS.append(f)
    return f


@test
def setup_database():
    c = connect()
    c.autocommit = True
    cur = c.cursor()
    cur.execute("IF DB_ID('MssqlPython') IS NOT NULL DROP DATABASE MssqlPython")
    cur.execute("CREATE DATABASE MssqlPython")
    cur.execute("USE MssqlPython")
    cur.execute("CREATE TABLE t (id int PRIMARY KEY, name nvarchar(40), amount decimal(12,3), "
                "raw varbinary(16), at datetime2(3), flag bit, big bigint, f float)")
    c.close()


@test
def types_with_and_without_tls():
    for encrypt in ("yes", "no"):
        c = connect(encrypt)
        cur = c.cursor()
        cur.execute("SELECT 1 AS one, N'Grüße ✓' AS s, CAST(12.5 AS decimal(5,2)) AS d, "
                    "CAST(NULL AS int) AS n, CAST('2024-02-29' AS date) AS day, "
                    "CAST(0x0102 AS varbinary(4)) AS b, CAST(5000000000 AS bigint) AS g")
        eq(tuple(cur.fetchall()[0]), (1, "Grüße ✓", decimal.Decimal("12.50"), None,
                               datetime.date(2024, 2, 29), b"\x01\x02", 5000000000),
           f"row (Encrypt={encrypt})")
        eq([d[0] for d in cur.description], ["one", "s", "d", "n", "day", "b", "g"], "names")
        c.close()


@test
def parameters_round_trip():
    c = connect(database="MssqlPython")
    cur = c.cursor()
    at = datetime.datetime(2030, 12, 31, 23, 59, 58, 123000)
    cur.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (1, "ünïcode", decimal.Decimal("-1234.567"), b"\xde\xad", at, True, 2**40, 2.5))
    eq(cur.rowcount, 1, "rowcount")
    cur.execute("INSERT INTO t (id, name) VALUES (?, ?)", (2, None))
    c.commit()
    cur.execute("SELECT id, name, amount, raw, at, flag, big, f FROM t WHERE id >= ? ORDER BY id",
                (1,))
    rows = cur.fetchall()
    eq(tuple(rows[0]), (1, "ünïcode", decimal.Decimal("-1234.567"), b"\xde\xad", at, True,
                        2**40, 2.5), "typed row")
    eq(tuple(rows[1])[:3], (2, None, None), "NULLs")


@test
def transactions_commit_and_rollback():
    c = connect(database="MssqlPython")
    eq(c.autocommit, False, "autocommit off by default")
    cur = c.cursor()
    cur.execute("INSERT INTO t (id) VALUES (10)")
    c.rollback()
    cur.execute("SELECT COUNT(*) FROM t WHERE id = 10")
    eq(cur.fetchall()[0][0], 0, "rolled back")
    cur.execute("INSERT INTO t (id) VALUES (11)")
    c.commit()
    other = connect(database="MssqlPython").cursor()
    other.execute("SELECT COUNT(*) FROM t WHERE id = 11")
    eq(other.fetchall()[0][0], 1, "committed, seen by another connection")


@test
def errors_map_to_their_classes():
    c = connect(database="MssqlPython")
    cur = c.cursor()
    expect(cur, "SELECT * FROM nosuch", mssql_python.ProgrammingError, "Invalid object name 'nosuch'")
    expect(cur, "SELECT 1/0", mssql_python.DataError, "Divide by zero")
    expect(cur, "INSERT INTO t (id) VALUES (1)", mssql_python.IntegrityError, "PRIMARY KEY")
    expect(cur, "SELECT * FROM", mssql_python.ProgrammingError, "Incorrect syntax")
    # The connection goes on after errors.
    cur.execute("SELECT 7")
    eq(cur.fetchall()[0][0], 7, "after errors")


def main():
    passed = failed = 0
    for t in TESTS:
        try:
            t()
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL mssql-python {t.__name__}: {e}")
            if not isinstance(e, Failure):
                traceback.print_exc(file=sys.stdout)
        else:
            passed += 1
            print(f"ok   mssql-python {t.__name__}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
