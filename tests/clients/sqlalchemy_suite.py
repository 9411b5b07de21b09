#!/usr/bin/env python3
"""SQLAlchemy 2.x's mssql dialect and pandas, unmodified, against extentdb's TDS server.

    python3 sqlalchemy_suite.py pytds|pymssql --host 127.0.0.1 --port PORT [--password PW]

Runs through mssql+pytds (the sqlalchemy-pytds package over python-tds) or mssql+pymssql
(FreeTDS db-lib). The password defaults to $MSSQL_SA_PASSWORD. Nothing in the dialect is
patched or configured around the server: the URLs carry only what a SQL Server user would
pass (host, port, login, database). Each step asserts what it reads and prints
'PASS name' or 'FAIL name: why'; the last line is 'N passed, N failed' and the exit status
is 1 if any step failed. A step that fails makes the later ones that depend on it fail too
(they are still run and reported).

Steps, in order, each on the suite's own database (SqlaClient_<driver>, made fresh):
  connect         create_engine and the first connect: the dialect's version check
                  (@@VERSION / SERVERPROPERTY), SCHEMA_NAME(), its isolation-level probe
                  (sys.system_views, sys.dm_exec_sessions.transaction_isolation_level),
                  its comment-support probe (fn_listextendedproperty)
  create_all      MetaData.create_all of two tables: IDENTITY primary keys, NOT NULL and
                  NULL columns of int, bigint, nvarchar(n), nvarchar(max), decimal,
                  datetime2 and bit, a FOREIGN KEY, a UNIQUE constraint (has_table before
                  each CREATE; a second create_all creates nothing)
  inspect         get_table_names, get_columns (types, nullability, IDENTITY),
                  get_pk_constraint, get_foreign_keys, get_indexes (the UNIQUE
                  constraint's index), has_table
  core            Core insert (executemany) and a select with WHERE and ORDER BY
  orm             a mapped class with an IDENTITY key: add and flush (INSERT ... OUTPUT
                  inserted.id), query, update, delete in a Session
  rollback        a transaction's insert rolled back, then gone
  pandas          DataFrame.to_sql (if_exists 'replace', then 'append'), read_sql_table and
                  read_sql_query, values compared

Not yet run, with what the server answers (each left out of the steps above):
  - A nonclustered index (sa.Index) in create_all: the dialect creates it inside
    create_all's transaction, and extentdb refuses CREATE INDEX inside a transaction:
    Msg 40517 "extentdb does not support CREATE INDEX inside a transaction yet."
  - to_sql(if_exists='replace') over a table that exists: pandas drops and creates it
    in one transaction: Msg 40517 "extentdb does not support CREATE TABLE of 'frame' in
    the transaction that dropped it yet." (to_sql 'replace' of a new table, then
    'append', run.)
  - An nvarchar(max) value whose row passes 8,060 bytes: Msg 40517 "extentdb does not
    support rows longer than 8,060 bytes in a page (row-overflow and LOB storage; ...)
    yet." (the suite's longest value is 3,000 characters).
  - get_unique_constraints: the mssql dialect does not implement it (NotImplementedError
    in SQLAlchemy itself); the UNIQUE constraint is read through get_indexes instead.
  - Table and column comments (comment=...): the dialect would add them with
    sp_addextendedproperty: Msg 40517 "extentdb does not support sp_addextendedproperty
    (extended properties) yet." None are used; sys.extended_properties, which get_columns
    joins, and fn_listextendedproperty, the dialect's probe at connect, answer empty.
The suite's database is made with the driver's own autocommit connection (CREATE DATABASE
cannot run in a transaction, and sqlalchemy-pytds offers no AUTOCOMMIT isolation level).
"""

import argparse
import datetime
import os
import sys
import traceback
from decimal import Decimal

parser = argparse.ArgumentParser()
parser.add_argument("driver", choices=["pytds", "pymssql"])
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--user", default="sa")
parser.add_argument("--password", default=os.environ.get("MSSQL_SA_PASSWORD", ""))
parser.add_argument("--echo", action="store_true", help="log every statement sent (create_engine echo)")
parser.add_argument("-k", dest="only", default=None, help="run only steps whose name contains this")
ARGS = parser.parse_args()

import pandas as pd  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from sqlalchemy import URL  # noqa: E402
from sqlalchemy.dialects import mssql  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

DB = "SqlaClient_" + ARGS.driver


def url(database):
    return URL.create(
        "mssql+" + ARGS.driver,
        username=ARGS.user,
        password=ARGS.password,
        host=ARGS.host,
        port=ARGS.port,
        database=database,
    )


STATE = {}
RESULTS = []


def step(fn):
    RESULTS.append(fn)
    return fn


def expect(got, want, what):
    assert got == want, f"{what}: got {got!r}, want {want!r}"


@step
def connect():
    # CREATE DATABASE runs outside a transaction, which the dialect only opens for
    # mssql+pymssql (sqlalchemy-pytds has no AUTOCOMMIT level): made through the driver.
    raw = sa.create_engine(url("master")).dialect.dbapi
    conn = raw.connect(server=ARGS.host, port=ARGS.port, user=ARGS.user,
                       password=ARGS.password, database="master", autocommit=True)
    cur = conn.cursor()
    cur.execute(f"IF DB_ID('{DB}') IS NOT NULL DROP DATABASE [{DB}]")
    cur.execute(f"CREATE DATABASE [{DB}]")
    conn.close()
    engine = sa.create_engine(url(DB), echo=ARGS.echo)
    with engine.connect() as c:
        expect(c.scalar(sa.text("SELECT DB_NAME()")), DB, "DB_NAME()")
    d = engine.dialect
    STATE["engine"] = engine
    assert d.server_version_info and d.server_version_info[0] >= 16, d.server_version_info
    expect(d.default_schema_name, "dbo", "default_schema_name")
    expect(d.default_isolation_level, "READ COMMITTED", "default_isolation_level")
    expect(d.supports_comments, True, "supports_comments (fn_listextendedproperty probe)")


def tables():
    md = sa.MetaData()
    parent = sa.Table(
        "parent",
        md,
        sa.Column("id", sa.Integer, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("code", sa.Unicode(20), nullable=False, unique=True),
        sa.Column("qty", sa.Integer, nullable=False),
        sa.Column("big", sa.BigInteger, nullable=True),
        sa.Column("notes", sa.UnicodeText, nullable=True),
        sa.Column("price", sa.Numeric(10, 2), nullable=False),
        sa.Column("made", mssql.DATETIME2, nullable=True),
        sa.Column("active", sa.Boolean, nullable=False),
    )
    child = sa.Table(
        "child",
        md,
        sa.Column("id", sa.Integer, sa.Identity(start=1, increment=1), primary_key=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("parent.id"), nullable=False),
        sa.Column("label", sa.Unicode(50), nullable=True),
    )
    return md, parent, child


@step
def create_all():
    md, parent, child = tables()
    md.create_all(STATE["engine"])
    STATE["parent"], STATE["child"] = parent, child
    # A second create_all finds both tables (has_table) and creates nothing.
    md.create_all(STATE["engine"])


@step
def inspect():
    insp = sa.inspect(STATE["engine"])
    expect(sorted(insp.get_table_names()), ["child", "parent"], "get_table_names")
    assert insp.has_table("parent") and not insp.has_table("nothing_here"), "has_table"
    cols = {c["name"]: c for c in insp.get_columns("parent")}
    expect(list(cols), ["id", "code", "qty", "big", "notes", "price", "made", "active"], "columns")
    kinds = {
        "id": (mssql.INTEGER, False),
        "code": (mssql.NVARCHAR, False),
        "qty": (mssql.INTEGER, False),
        "big": (mssql.BIGINT, True),
        "notes": (mssql.NVARCHAR, True),
        "price": (mssql.DECIMAL, False),
        "made": (mssql.DATETIME2, True),
        "active": (mssql.BIT, False),
    }
    for name, (kind, nullable) in kinds.items():
        c = cols[name]
        assert isinstance(c["type"], kind), f"{name}: type {c['type']!r}, want {kind.__name__}"
        expect(c["nullable"], nullable, f"{name} nullable")
    expect(cols["code"]["type"].length, 20, "code length")
    expect(cols["notes"]["type"].length, None, "notes length (max)")
    expect((cols["price"]["type"].precision, cols["price"]["type"].scale), (10, 2), "price")
    ident = cols["id"].get("identity")
    assert ident and ident["start"] == 1 and ident["increment"] == 1, f"identity {ident!r}"
    expect(insp.get_pk_constraint("parent")["constrained_columns"], ["id"], "pk columns")
    fks = insp.get_foreign_keys("child")
    expect(len(fks), 1, "foreign keys")
    expect(
        (fks[0]["constrained_columns"], fks[0]["referred_table"], fks[0]["referred_columns"]),
        (["parent_id"], "parent", ["id"]),
        "foreign key",
    )
    # The dialect reflects a UNIQUE constraint as the unique index enforcing it
    # (it has no get_unique_constraints); the clustered PRIMARY KEY is not an index to it.
    idx = [(i["column_names"], i["unique"]) for i in insp.get_indexes("parent")]
    expect(idx, [(["code"], True)], "get_indexes(parent)")
    expect(insp.get_indexes("child"), [], "get_indexes(child)")


@step
def core():
    parent = STATE["parent"]
    made = datetime.datetime(2024, 5, 17, 9, 30, 15, 250000)
    rows = [
        {"code": f"P{i:02}", "qty": i, "big": 10**12 + i if i % 2 else None,
         "notes": "x" * (3000 if i == 3 else i), "price": Decimal(f"{i}.25"),
         "made": made, "active": i % 2 == 0}
        for i in range(1, 7)
    ]
    with STATE["engine"].begin() as c:
        r = c.execute(parent.insert(), rows)
        expect(r.rowcount, 6, "executemany rowcount")
    with STATE["engine"].connect() as c:
        got = c.execute(
            sa.select(parent.c.id, parent.c.code, parent.c.big, parent.c.price, parent.c.made,
                      parent.c.active, sa.func.len(parent.c.notes))
            .where(parent.c.qty >= 3)
            .order_by(parent.c.qty.desc())
        ).all()
    expect([r.code for r in got], ["P06", "P05", "P04", "P03"], "codes")
    expect([r.id for r in got], [6, 5, 4, 3], "identity values")
    expect(got[1].big, 10**12 + 5, "bigint")
    expect(got[0].big, None, "NULL bigint")
    expect(got[3].price, Decimal("3.25"), "decimal")
    expect(got[0].made, made, "datetime2")
    expect((got[0].active, got[1].active), (True, False), "bit")
    expect(got[3][6], 3000, "LEN(nvarchar(max))")


class Base(DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "item"
    id: Mapped[int] = mapped_column(sa.Integer, sa.Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(sa.Unicode(40))
    amount: Mapped[Decimal] = mapped_column(sa.Numeric(12, 3))


@step
def orm():
    engine = STATE["engine"]
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        a, b = Item(name="alpha", amount=Decimal("1.500")), Item(name="beta", amount=Decimal("2"))
        s.add_all([a, b])
        s.flush()
        expect((a.id, b.id), (1, 2), "ids from OUTPUT inserted.id")
        s.commit()
    with Session(engine) as s:
        got = s.scalars(sa.select(Item).order_by(Item.id)).all()
        expect([(i.id, i.name, i.amount) for i in got],
               [(1, "alpha", Decimal("1.500")), (2, "beta", Decimal("2.000"))], "queried")
        got[0].name = "alpha2"
        s.delete(got[1])
        s.commit()
    with Session(engine) as s:
        got = s.scalars(sa.select(Item)).all()
        expect([(i.id, i.name) for i in got], [(1, "alpha2")], "after update and delete")
        expect(s.get(Item, 2), None, "deleted row")


@step
def rollback():
    engine, child = STATE["engine"], STATE["child"]
    with engine.connect() as c:
        t = c.begin()
        c.execute(child.insert(), [{"parent_id": 1, "label": "gone"}])
        expect(c.scalar(sa.select(sa.func.count()).select_from(child)), 1, "inside")
        t.rollback()
    with engine.connect() as c:
        expect(c.scalar(sa.select(sa.func.count()).select_from(child)), 0, "after rollback")
        c.execute(child.insert(), [{"parent_id": 2, "label": "kept"}])
        c.commit()
        expect(c.execute(sa.select(child.c.parent_id, child.c.label)).all(), [(2, "kept")],
               "committed")


@step
def pandas():
    engine = STATE["engine"]
    df = pd.DataFrame({
        "n": [1, 2, 3],
        "big": [2**40, -5, 0],
        "x": [0.5, 1.25, -3.0],
        "s": ["one", "two", None],
        "t": pd.to_datetime(["2024-01-02 03:04:05", "2025-06-07 08:09:10", "2026-11-28 00:00:00"]),
        "b": [True, False, True],
    })
    expect(df.to_sql("frame", engine, if_exists="replace", index=False), 3, "to_sql replace")
    more = df.assign(n=df.n + 10)
    expect(more.to_sql("frame", engine, if_exists="append", index=False), 3, "to_sql append")
    want = pd.concat([df, more], ignore_index=True)
    got = pd.read_sql_table("frame", engine).sort_values("n", ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    q = pd.read_sql_query(sa.text("SELECT n, s FROM frame WHERE n > :k ORDER BY n"), engine,
                          params={"k": 2})
    expect(q.values.tolist(), [[3, None], [11, "one"], [12, "two"], [13, None]], "read_sql_query")


def main():
    passed = failed = 0
    for fn in RESULTS:
        if ARGS.only and ARGS.only not in fn.__name__:
            continue
        try:
            fn()
            print(f"PASS {fn.__name__}", flush=True)
            passed += 1
        except Exception as e:  # noqa: BLE001 (every failure is reported, then counted)
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}".splitlines()[0][:2000], flush=True)
            traceback.print_exc(file=sys.stderr)
            failed += 1
    if "engine" in STATE:
        STATE["engine"].dispose()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
