#!/usr/bin/env python3
"""DB-API test set for extentdb's TDS server, run under python-tds or pymssql.

    python3 python_dbapi.py pytds|pymssql --host 127.0.0.1 --port PORT [--password PW]

The password defaults to $MSSQL_SA_PASSWORD. Each test asserts results and, for errors,
the SQL Server message number and severity (class) the driver reports. Prints one line
per test, then 'N passed, N failed'; exits 1 if any failed.

The two drivers reach the server differently: pytds sends parameterized queries as RPC
(sp_executesql with typed parameters) and opens transactions with transaction-manager
requests; pymssql (FreeTDS db-lib) substitutes parameters into SQL text and sends
BEGIN TRAN / COMMIT / ROLLBACK batches.
"""

import argparse
import datetime
import os
import sys
import traceback
import uuid
from decimal import Decimal

parser = argparse.ArgumentParser()
parser.add_argument("driver", choices=["pytds", "pymssql"])
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--user", default="sa")
parser.add_argument("--password", default=os.environ.get("MSSQL_SA_PASSWORD", ""))
parser.add_argument("-k", dest="only", default=None, help="run only tests whose name contains this")
ARGS = parser.parse_args()

if ARGS.driver == "pytds":
    import pytds as driver
else:
    import pymssql as driver

DB = "PyClient_" + ARGS.driver


def connect(database=DB, autocommit=True):
    if ARGS.driver == "pytds":
        return driver.connect(
            server=ARGS.host,
            port=ARGS.port,
            user=ARGS.user,
            password=ARGS.password,
            database=database,
            autocommit=autocommit,
            login_timeout=10,
            timeout=60,
        )
    return driver.connect(
        server=ARGS.host,
        port=ARGS.port,
        user=ARGS.user,
        password=ARGS.password,
        database=database,
        autocommit=autocommit,
        login_timeout=10,
        timeout=60,
        tds_version="7.4",
    )


def set_autocommit(conn, on):
    if ARGS.driver == "pytds":
        conn.autocommit = on
    else:
        conn.autocommit(on)


def error_info(e):
    """(number, severity) of a server error as the driver reports it."""
    if ARGS.driver == "pytds":
        return e.number, e.severity
    # pymssql's DB-API exception is raised while handling _mssql.MSSQLDatabaseException,
    # which has the fields.
    inner = e.__context__ if e.__context__ is not None else e.__cause__
    return getattr(inner, "number", None), getattr(inner, "severity", None)


class Failure(Exception):
    pass


def eq(actual, expected, what=""):
    if actual != expected or type(actual) is not type(expected):
        raise Failure(
            f"{what}: expected {expected!r} ({type(expected).__name__}), "
            f"got {actual!r} ({type(actual).__name__})"
        )


def check(cond, what):
    if not cond:
        raise Failure(what)


def expect_error(cur, sql, number, severity, cls=None, params=None):
    try:
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(sql, params)
        # Some drivers raise only when the results are read.
        while True:
            if cur.description:
                cur.fetchall()
            if not cur.nextset():
                break
    except driver.DatabaseError as e:
        n, s = error_info(e)
        eq(n, number, f"{sql!r}: error number")
        eq(s, severity, f"{sql!r}: severity")
        if cls is not None:
            check(isinstance(e, cls), f"{sql!r}: {type(e).__name__} is not a {cls.__name__}")
        return e
    raise Failure(f"{sql!r}: expected error {number}, got none")


def scalar(cur, sql, params=None):
    if params is None:
        cur.execute(sql)
    else:
        cur.execute(sql, params)
    row = cur.fetchone()
    check(row is not None, f"{sql!r}: no row")
    rest = cur.fetchall()
    eq(rest, [], f"{sql!r}: rows after the first")
    return row[0]


TESTS = []


def test(f):
    TESTS.append(f)
    return f


# ---------------------------------------------------------------------------------------
# Setup: a database of this driver's own, created through a connection to master.

def setup():
    conn = connect(database="master")
    cur = conn.cursor()
    try:
        cur.execute(f"DROP DATABASE {DB}")
    except driver.DatabaseError:
        pass
    cur.execute(f"CREATE DATABASE {DB}")
    conn.close()


# ---------------------------------------------------------------------------------------
# Connecting

@test
def connect_with_database():
    conn = connect()
    cur = conn.cursor()
    eq(scalar(cur, "SELECT DB_NAME()"), DB, "DB_NAME() after connect(database=)")
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 0, "@@TRANCOUNT in autocommit")
    cur.execute("SELECT 1 AS one, 'two' AS two")
    eq([d[0] for d in cur.description], ["one", "two"], "column names")
    eq(cur.fetchall(), [(1, "two")], "rows")
    conn.close()


@test
def connect_to_missing_database_fails():
    # SQL Server answers ERROR 4060 (class 11) 'Cannot open database "X" requested by the
    # login. The login failed.' then 18456 (class 14); both drivers report the last number.
    try:
        connect(database="NoSuchDatabase_xyz")
    except (driver.DatabaseError, driver.InterfaceError) as e:
        n, s = error_info(e)
        eq(n, 18456, "error number")
        eq(s, 14, "severity")
        if ARGS.driver == "pytds":
            check('Cannot open database "NoSuchDatabase_xyz"' in str(e), f"4060 text missing: {e}")
        return
    raise Failure("connect to a missing database succeeded")


@test
def wrong_password_fails_with_18456():
    try:
        if ARGS.driver == "pytds":
            driver.connect(server=ARGS.host, port=ARGS.port, user=ARGS.user,
                           password=ARGS.password + "x", login_timeout=10)
        else:
            driver.connect(server=ARGS.host, port=ARGS.port, user=ARGS.user,
                           password=ARGS.password + "x", login_timeout=10, tds_version="7.4")
    except (driver.DatabaseError, driver.InterfaceError) as e:
        n, s = error_info(e)
        eq(n, 18456, "login failure number")
        eq(s, 14, "login failure severity")
        if ARGS.driver == "pytds":
            check("Login failed for user 'sa'" in str(e), f"18456 text missing: {e}")
        return
    raise Failure("login with a wrong password succeeded")


# ---------------------------------------------------------------------------------------
# Every column type

TYPES_DDL = """CREATE TABLE AllTypes (
    id INT NOT NULL PRIMARY KEY,
    b BIT, ti TINYINT, si SMALLINT, i INT, bi BIGINT,
    d DECIMAL(10, 3), d38 DECIMAL(38, 0), n NUMERIC(5, 5),
    f FLOAT, r REAL,
    c CHAR(5), vc VARCHAR(20), nc NCHAR(4), nv NVARCHAR(30),
    vm VARCHAR(MAX), nm NVARCHAR(MAX),
    bn BINARY(4), vb VARBINARY(10), vbm VARBINARY(MAX),
    dt DATE, dtm DATETIME, dt2 DATETIME2, dt20 DATETIME2(0),
    g UNIQUEIDENTIFIER)"""

COLUMNS = ["id", "b", "ti", "si", "i", "bi", "d", "d38", "n", "f", "r", "c", "vc", "nc", "nv",
           "vm", "nm", "bn", "vb", "vbm", "dt", "dtm", "dt2", "dt20", "g"]

BLOB = bytes(range(256)) * 4

FULL_ROW = (
    1, True, 255, -32768, -2147483648, 9223372036854775807,
    Decimal("-1234567.891"), Decimal("12345678901234567890123456789012345678"),
    Decimal("0.12345"),
    1.5e300, 3.25,
    "ab   ", "hello", "αβ  ", "Grüße 😀",
    "x" * 3000, "é" * 1000,
    b"\x01\x02\x03\x04", b"\xde\xad\xbe\xef", BLOB,
    datetime.date(2024, 2, 29),
    datetime.datetime(2024, 2, 29, 13, 45, 30, 997000),
    datetime.datetime(2024, 2, 29, 13, 45, 30, 123456),
    datetime.datetime(1, 1, 1, 0, 0, 0),
    uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FD430C8"),
)

FULL_INSERT = (
    "INSERT INTO AllTypes VALUES (1, 1, 255, -32768, -2147483648, 9223372036854775807, "
    "-1234567.891, 12345678901234567890123456789012345678, 0.12345, 1.5e300, 3.25, "
    "'ab', 'hello', N'αβ', N'Grüße 😀', REPLICATE('x', 3000), REPLICATE(N'é', 1000), "
    "0x01020304, 0xDEADBEEF, 0x" + BLOB.hex() + ", '2024-02-29', '2024-02-29 13:45:30.997', "
    "'2024-02-29 13:45:30.1234567', '0001-01-01', '6F9619FF-8B86-D011-B42D-00C04FD430C8')"
)


def select_all_types(cur, where):
    cur.execute(f"SELECT {', '.join(COLUMNS)} FROM AllTypes WHERE {where} ORDER BY id")
    eq([d[0] for d in cur.description], COLUMNS, "column names")
    return cur.fetchall()


@test
def every_column_type():
    conn = connect()
    cur = conn.cursor()
    cur.execute(TYPES_DDL)
    cur.execute(FULL_INSERT)
    eq(cur.rowcount, 1, "INSERT rowcount")
    cur.execute("INSERT INTO AllTypes (id) VALUES (2)")
    # Every other column NULL: rows mixing NULLs and values (NBCROW on the wire).
    cur.execute(
        "INSERT INTO AllTypes (id, ti, i, d, n, r, vc, nv, nm, vb, dt, dt2, g) VALUES "
        "(3, 0, 0, 0, 0, 0, '', N'', N'', 0x, '9999-12-31', '9999-12-31 23:59:59.9999999', "
        "'00000000-0000-0000-0000-000000000000')"
    )
    rows = select_all_types(cur, "id = 1")
    eq(len(rows), 1, "rows")
    for name, got, want in zip(COLUMNS, rows[0], FULL_ROW):
        eq(got, want, f"column {name}")
    rows = select_all_types(cur, "id = 2")
    for name, got in zip(COLUMNS[1:], rows[0][1:]):
        eq(got, None, f"NULL {name}")
    rows = select_all_types(cur, "id = 3")
    expect3 = {
        "ti": 0, "i": 0, "d": Decimal("0.000"), "n": Decimal("0.00000"), "r": 0.0, "vc": "",
        "nv": "", "nm": "", "vb": b"", "dt": datetime.date(9999, 12, 31),
        "dt2": datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "g": uuid.UUID(int=0),
    }
    for name, got in zip(COLUMNS, rows[0]):
        if name == "id":
            eq(got, 3, "id")
        else:
            eq(got, expect3.get(name), f"row 3 column {name}")
    conn.close()


@test
def literal_expressions_and_typed_nulls():
    conn = connect()
    cur = conn.cursor()
    cur.execute(
        "SELECT 42 AS i, CAST(7 AS BIGINT) AS bi, CAST(1 AS BIT) AS b, 1.25 AS d, "
        "CAST(2.5 AS FLOAT) AS f, 'abc' AS s, N'Grüße 😀' AS ns, 0xCAFE AS bin, "
        "CAST('2001-02-03' AS DATE) AS dt, CAST('2001-02-03 04:05:06.5' AS DATETIME2) AS dt2"
    )
    eq(cur.fetchall(), [(42, 7, True, Decimal("1.25"), 2.5, "abc", "Grüße 😀", b"\xca\xfe",
                         datetime.date(2001, 2, 3),
                         datetime.datetime(2001, 2, 3, 4, 5, 6, 500000))], "literal row")
    cur.execute(
        "SELECT CAST(NULL AS INT), CAST(NULL AS NVARCHAR(10)), CAST(NULL AS VARBINARY(MAX)), "
        "CAST(NULL AS DATETIME2), CAST(NULL AS UNIQUEIDENTIFIER), CAST(NULL AS DECIMAL(9,2))"
    )
    eq(cur.fetchall(), [(None,) * 6], "typed NULLs")
    # Computed text from NVARCHAR keeps its characters (SQL Server types it NVARCHAR).
    cur.execute("CREATE TABLE Uni (id INT PRIMARY KEY, nv NVARCHAR(20))")
    cur.execute("INSERT INTO Uni VALUES (1, N'abc'), (2, N'Ωmega 😀')")
    cur.execute("SELECT UPPER(nv), N'x' + nv, ISNULL(nv, N'') FROM Uni ORDER BY id")
    eq(cur.fetchall(), [("ABC", "xabc", "abc"), ("ΩMEGA 😀", "xΩmega 😀", "Ωmega 😀")],
       "expressions over NVARCHAR")
    conn.close()


# ---------------------------------------------------------------------------------------
# Parameters

@test
def parameters_round_trip():
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE Params (id INT PRIMARY KEY, s NVARCHAR(50), a VARCHAR(50), "
                "d DECIMAL(12, 4), f FLOAT, dt DATETIME2, dtm DATETIME, b VARBINARY(20), "
                "bit BIT, big BIGINT, dd DATE, g UNIQUEIDENTIFIER)")
    g = uuid.UUID("12345678-1234-5678-9abc-def012345678")
    vals = (1, "Grüße 😀 'quoted'", "plain ascii", Decimal("-12345678.1234"), 0.1,
            datetime.datetime(2023, 12, 31, 23, 59, 58, 123000),
            datetime.datetime(2020, 1, 2, 3, 4, 5),
            driver.Binary(b"\x00\x01\xff"), True, -(2 ** 62), datetime.date(1999, 12, 31), g)
    if ARGS.driver == "pytds":
        cur.execute("INSERT INTO Params VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    vals)
    else:
        # pymssql renders a UUID parameter as text.
        cur.execute("INSERT INTO Params VALUES (%d, %s, %s, %s, %s, %s, %s, %s, %s, %d, %s, %s)",
                    vals[:11] + (str(g),))
    eq(cur.rowcount, 1, "parameterized INSERT rowcount")
    cur.execute("SELECT id, s, a, d, f, dt, dtm, b, bit, big, dd, g FROM Params WHERE id = %s",
                (1,))
    got = cur.fetchall()
    eq(len(got), 1, "rows")
    # A VARBINARY comes back as bytes whatever Binary() made of the parameter.
    eq(got[0], vals[:7] + (b"\x00\x01\xff",) + vals[8:], "row inserted with parameters")
    # NULL parameters.
    cur.execute("INSERT INTO Params (id, s, d, dt, b) VALUES (%s, %s, %s, %s, %s)",
                (2, None, None, None, None))
    cur.execute("SELECT s, d, dt, b FROM Params WHERE id = %s", (2,))
    eq(cur.fetchall(), [(None, None, None, None)], "NULL parameters")
    # Parameters as expressions.
    eq(scalar(cur, "SELECT %s + 1", (41,)), 42, "SELECT %s + 1")
    eq(scalar(cur, "SELECT %s", ("Grüße 😀",)), "Grüße 😀", "SELECT unicode %s")
    eq(scalar(cur, "SELECT COUNT(*) FROM Params WHERE s LIKE %s", ("Grü%",)), 1, "LIKE %s")
    # Named (pyformat) parameters.
    eq(scalar(cur, "SELECT a FROM Params WHERE id = %(id)s", {"id": 1}), "plain ascii",
       "%(name)s parameter")
    conn.close()


@test
def executemany_inserts_every_row():
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE Many (id INT PRIMARY KEY, name NVARCHAR(20))")
    rows = [(i, f"name {i}") for i in range(1, 26)]
    cur.executemany("INSERT INTO Many VALUES (%s, %s)", rows)
    eq(cur.rowcount, 25, "executemany rowcount")
    eq(scalar(cur, "SELECT COUNT(*) FROM Many"), 25, "rows after executemany")
    cur.execute("SELECT id, name FROM Many WHERE id > %s ORDER BY id DESC", (23,))
    eq(cur.fetchall(), [(25, "name 25"), (24, "name 24")], "rows by parameter")
    conn.close()


# ---------------------------------------------------------------------------------------
# Row counts and multiple result sets

@test
def rowcount_of_insert_update_delete():
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE Counts (id INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO Counts VALUES (1, 10), (2, 20), (3, 30)")
    eq(cur.rowcount, 3, "multi-row INSERT")
    cur.execute("UPDATE Counts SET v = v + 1 WHERE id >= 2")
    eq(cur.rowcount, 2, "UPDATE")
    cur.execute("UPDATE Counts SET v = 0 WHERE id = 99")
    eq(cur.rowcount, 0, "UPDATE of no row")
    cur.execute("DELETE FROM Counts WHERE v = 31")
    eq(cur.rowcount, 1, "DELETE")
    cur.execute("SELECT id, v FROM Counts ORDER BY id")
    eq(cur.fetchall(), [(1, 10), (2, 21)], "rows after DML")
    cur.execute("DELETE FROM Counts")
    eq(cur.rowcount, 2, "DELETE all")
    conn.close()


@test
def multiple_result_sets():
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT 1 AS a; SELECT 'x' AS b, 2 AS c; SELECT 3 AS d WHERE 1 = 0")
    eq([d[0] for d in cur.description], ["a"], "first set's columns")
    eq(cur.fetchall(), [(1,)], "first set")
    check(cur.nextset(), "second set exists")
    eq([d[0] for d in cur.description], ["b", "c"], "second set's columns")
    eq(cur.fetchall(), [("x", 2)], "second set")
    check(cur.nextset(), "third set exists")
    eq([d[0] for d in cur.description], ["d"], "third set's columns")
    eq(cur.fetchall(), [], "third set (empty)")
    check(not cur.nextset(), "no fourth set")
    conn.close()


# ---------------------------------------------------------------------------------------
# Transactions

@test
def transactions_commit_and_rollback():
    setup_conn = connect()
    setup_conn.cursor().execute("CREATE TABLE Tx (id INT PRIMARY KEY)")
    setup_conn.close()

    conn = connect(autocommit=False)
    cur = conn.cursor()
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 1, "@@TRANCOUNT with autocommit off")
    cur.execute("INSERT INTO Tx VALUES (1)")
    conn.rollback()
    eq(scalar(cur, "SELECT COUNT(*) FROM Tx"), 0, "rows after rollback")
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 1, "a new transaction after rollback")
    cur.execute("INSERT INTO Tx VALUES (2)")
    cur.execute("INSERT INTO Tx VALUES (3)")
    conn.commit()
    conn.close()

    other = connect()
    eq(scalar(other.cursor(), "SELECT COUNT(*) FROM Tx"), 2, "committed rows, seen elsewhere")
    other.close()

    # Closing a connection with an open transaction rolls it back.
    conn = connect(autocommit=False)
    conn.cursor().execute("INSERT INTO Tx VALUES (4)")
    conn.close()
    other = connect()
    eq(scalar(other.cursor(), "SELECT COUNT(*) FROM Tx WHERE id = 4"), 0,
       "uncommitted row after close")
    other.close()


@test
def autocommit_switching():
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE Auto (id INT PRIMARY KEY)")
    cur.execute("INSERT INTO Auto VALUES (1)")
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 0, "@@TRANCOUNT in autocommit")
    set_autocommit(conn, False)
    cur.execute("INSERT INTO Auto VALUES (2)")
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 1, "@@TRANCOUNT after autocommit off")
    conn.rollback()
    set_autocommit(conn, True)
    cur.execute("SELECT id FROM Auto ORDER BY id")
    eq(cur.fetchall(), [(1,)], "autocommitted row kept, rolled-back row gone")
    # Explicit T-SQL transactions in autocommit mode.
    cur.execute("BEGIN TRAN; INSERT INTO Auto VALUES (5); ROLLBACK")
    cur.execute("BEGIN TRANSACTION")
    cur.execute("INSERT INTO Auto VALUES (6)")
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 1, "@@TRANCOUNT inside BEGIN TRAN")
    cur.execute("COMMIT")
    cur.execute("SELECT id FROM Auto ORDER BY id")
    eq(cur.fetchall(), [(1,), (6,)], "T-SQL transactions")
    conn.close()


# ---------------------------------------------------------------------------------------
# Errors: numbers and severities

@test
def errors_have_sql_server_numbers():
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE Dup (id INT PRIMARY KEY, v VARCHAR(5) NOT NULL)")
    cur.execute("INSERT INTO Dup VALUES (1, 'a')")
    expect_error(cur, "SELECT * FROM NoSuchTable", 208, 16, driver.ProgrammingError)
    expect_error(cur, "SELECT 1/0", 8134, 16, driver.DatabaseError)
    expect_error(cur, "INSERT INTO Dup VALUES (1, 'b')", 2627, 14, driver.IntegrityError)
    expect_error(cur, "SELECT 1 +", 102, 15, driver.ProgrammingError)
    expect_error(cur, "SELECT * FROM Dup WHERE", 156, 15)
    expect_error(cur, "SELECT nosuchcolumn FROM Dup", 207, 16, driver.ProgrammingError)
    expect_error(cur, "INSERT INTO Dup (id) VALUES (2)", 515, 16, driver.IntegrityError)
    expect_error(cur, "INSERT INTO Dup VALUES (3, 'toolong')", 2628, 16)
    expect_error(cur, "SELECT CAST('abc' AS INT)", 245, 16)
    expect_error(cur, "USE NoSuchDatabase", 911, 16)
    # A parameterized statement's error (RPC for pytds).
    expect_error(cur, "SELECT %s / 0", 8134, 16, params=(1,))
    # The connection goes on after errors.
    eq(scalar(cur, "SELECT COUNT(*) FROM Dup"), 1, "rows after the errors")
    conn.close()


@test
def error_in_transaction_keeps_it_open():
    conn = connect(autocommit=False)
    cur = conn.cursor()
    cur.execute("CREATE TABLE TxErr (id INT PRIMARY KEY)")
    conn.commit()
    cur.execute("INSERT INTO TxErr VALUES (1)")
    expect_error(cur, "INSERT INTO TxErr VALUES (1)", 2627, 14)
    eq(scalar(cur, "SELECT @@TRANCOUNT"), 1, "transaction still open after 2627")
    conn.commit()
    eq(scalar(cur, "SELECT COUNT(*) FROM TxErr"), 1, "first row committed")
    conn.close()


# ---------------------------------------------------------------------------------------
# PRINT and USE

def messages_of(conn, cur, sql):
    """Runs sql; returns [(number or None, severity, text)] of its informational messages."""
    if ARGS.driver == "pytds":
        cur.execute(sql)
        out = []
        for _cls, ex in cur.messages:
            out.append((ex.number, ex.severity, ex.text if hasattr(ex, "text") else str(ex)))
        return out
    got = []
    conn._conn.set_msghandler(
        lambda state, severity, srv, proc, line, text: got.append(
            (None, severity, text.decode() if isinstance(text, bytes) else text)))
    try:
        cur.execute(sql)
    finally:
        conn._conn.set_msghandler(None)
    return got


@test
def print_messages():
    conn = connect()
    cur = conn.cursor()
    msgs = messages_of(conn, cur, "PRINT 'hello from PRINT'")
    texts = [m[2] for m in msgs]
    check(any("hello from PRINT" in t for t in texts), f"PRINT text not among {msgs!r}")
    for number, severity, text in msgs:
        if "hello from PRINT" in text:
            eq(severity, 0, "PRINT severity")
            if number is not None:
                eq(number, 0, "PRINT message number")
    conn.close()


@test
def use_changes_database():
    conn = connect()
    cur = conn.cursor()
    msgs = messages_of(conn, cur, "USE master")
    eq(scalar(cur, "SELECT DB_NAME()"), "master", "DB_NAME() after USE master")
    if ARGS.driver == "pytds":
        # SQL Server sends INFO 5701 "Changed database context to 'master'." with the
        # database ENVCHANGE.
        check(any(m[0] == 5701 and "master" in m[2] for m in msgs), f"5701 not among {msgs!r}")
    cur.execute(f"USE {DB}")
    eq(scalar(cur, "SELECT DB_NAME()"), DB, "DB_NAME() after USE back")
    cur.execute("CREATE TABLE UseCheck (id INT)")
    cur.execute("USE master")
    expect_error(cur, "SELECT * FROM UseCheck", 208, 16)
    eq(scalar(cur, f"SELECT COUNT(*) FROM {DB}.dbo.UseCheck"), 0, "three-part name")
    conn.close()


@test
def informational_messages_are_not_errors():
    # SQL Server sends severity 10 as class 0; a driver that raises on class > its minimum
    # error severity (pymssql: 6) must not raise on a successful BACKUP or DBCC.
    conn = connect()
    cur = conn.cursor()
    for sql in [f"BACKUP DATABASE {DB} TO DISK = '{DB}_info.bak' WITH INIT",
                "DBCC TRACEON(3604)", "DBCC TRACEOFF(3604)"]:
        msgs = messages_of(conn, cur, sql)
        check(msgs, f"{sql!r}: no informational message")
        for number, severity, text in msgs:
            eq(severity, 0, f"{sql!r}: class of {text!r}")
    conn.close()


@test
def stored_procedure_by_callproc():
    # callproc sends an RPC naming the procedure: typed parameters, the OUTPUT one back as
    # a RETURNVALUE token; pytds reads RETURN's value from RETURNSTATUS.
    conn = connect()
    cur = conn.cursor()
    cur.execute("IF OBJECT_ID('AddTwo', 'P') IS NOT NULL DROP PROCEDURE AddTwo")
    cur.execute("CREATE PROCEDURE AddTwo @a int, @b int = 10, @sum int OUTPUT AS "
                "BEGIN SET @sum = @a + @b; RETURN @a * 2 END")
    out = driver.output(param_type="int") if ARGS.driver == "pytds" else driver.output(int)
    eq(list(cur.callproc("AddTwo", (4, 5, out))), [4, 5, 9], "callproc's OUTPUT parameter")
    if ARGS.driver == "pytds":
        eq(cur.get_proc_return_status(), 8, "RETURN status")
    expect_error(cur, "EXEC AddTwo", 201, 16)
    eq(scalar(cur, "SELECT COUNT(*) FROM sys.procedures WHERE name = 'AddTwo'"), 1, "sys.procedures")
    conn.close()


# ---------------------------------------------------------------------------------------

def main():
    setup()
    passed = failed = 0
    for t in TESTS:
        if ARGS.only and ARGS.only not in t.__name__:
            continue
        try:
            t()
        except Exception as e:  # noqa: BLE001 - a test's failure of any kind is reported
            failed += 1
            print(f"FAIL {ARGS.driver} {t.__name__}: {e}")
            if not isinstance(e, Failure):
                traceback.print_exc(file=sys.stdout)
        else:
            passed += 1
            print(f"ok   {ARGS.driver} {t.__name__}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
