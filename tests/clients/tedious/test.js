#!/usr/bin/env node
// tedious against extentdb's TDS server.
//
//   node test.js --port PORT [--host 127.0.0.1] [--password PW]   (PW defaults to $MSSQL_SA_PASSWORD)
//
// tedious sends every execSql as an RPC (sp_executesql with typed parameters), prepare /
// execute as sp_prepare / sp_execute, and transactions as transaction-manager requests, so
// this suite covers the server's RPC path. One test connects with encrypt: true (TLS, the
// server's self-signed certificate trusted), the others with encrypt: false. Each test
// asserts values, row counts and, for errors, SQL Server's message number and class. Prints
// one line per test, then 'N passed, N failed'; exits 1 if any failed.
'use strict';

const assert = require('node:assert/strict');
const { Connection, Request, TYPES, ISOLATION_LEVEL } = require('tedious');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const HOST = arg('host', '127.0.0.1');
const PORT = Number(arg('port', '0'));
const USER = arg('user', 'sa');
const PASSWORD = arg('password', process.env.MSSQL_SA_PASSWORD || '');
const ONLY = arg('only', null);
const DB = 'TediousClient';

// ---------------------------------------------------------------------------------------
// Promise wrappers

function connect(database = DB, encrypt = false) {
  return new Promise((resolve, reject) => {
    const conn = new Connection({
      server: HOST,
      authentication: { type: 'default', options: { userName: USER, password: PASSWORD } },
      options: {
        port: PORT,
        database,
        encrypt,
        trustServerCertificate: true,
        connectTimeout: 10000,
        requestTimeout: 60000,
      },
    });
    conn.infoMessages = [];
    conn.on('infoMessage', (m) => conn.infoMessages.push(m));
    conn.connect((err) => (err ? reject(err) : resolve(conn)));
  });
}

function close(conn) {
  return new Promise((resolve) => {
    if (conn.closed) return resolve();
    conn.on('end', resolve);
    conn.close();
  });
}

// Runs a request; resolves to { rowCount, sets: [{ columns, rows }], returns, err }.
// `how` is 'execSql' (RPC sp_executesql), 'execSqlBatch' (SQLBatch) or a function that
// starts the request.
function run(conn, sql, params = [], how = 'execSql', outputs = []) {
  return new Promise((resolve) => {
    const result = { sets: [], returns: {} };
    const req = new Request(sql, (err, rowCount) => {
      result.err = err;
      result.rowCount = rowCount;
      resolve(result);
    });
    for (const [name, type, value, options] of params) req.addParameter(name, type, value, options);
    for (const [name, type, value, options] of outputs) req.addOutputParameter(name, type, value, options);
    req.on('columnMetadata', (cols) => {
      result.sets.push({ columns: cols.map((c) => ({ name: c.colName, type: c.type.name, c })), rows: [] });
    });
    req.on('row', (cols) => result.sets[result.sets.length - 1].rows.push(cols.map((c) => c.value)));
    req.on('returnValue', (name, value, metadata) => {
      result.returns[name] = { value, type: metadata.type.name };
    });
    if (typeof how === 'function') how(req);
    else conn[how](req);
  });
}

async function ok(conn, sql, params, how, outputs) {
  const r = await run(conn, sql, params, how, outputs);
  if (r.err) throw new Error(`${sql}: unexpected error ${r.err.number}: ${r.err.message}`);
  return r;
}

async function rows(conn, sql, params, how) {
  const r = await ok(conn, sql, params, how);
  assert.equal(r.sets.length, 1, `${sql}: one result set`);
  return r.sets[0].rows;
}

async function expectError(conn, sql, number, cls, params = [], how = 'execSql') {
  const r = await run(conn, sql, params, how);
  assert.ok(r.err, `${sql}: expected error ${number}, got none`);
  assert.equal(r.err.number, number, `${sql}: error number (${r.err.message})`);
  assert.equal(r.err.class, cls, `${sql}: error class`);
  return r.err;
}

function tm(conn, method, ...args) {
  return new Promise((resolve, reject) => {
    conn[method]((err) => (err ? reject(err) : resolve()), ...args);
  });
}

const TESTS = [];
function test(name, f) {
  TESTS.push({ name, f });
}

// ---------------------------------------------------------------------------------------

test('connect to a database and a plain query', async () => {
  const conn = await connect();
  assert.deepEqual(await rows(conn, 'SELECT DB_NAME() AS db, 1 AS one'), [[DB, 1]]);
  // Login's INFO messages: 5701 (database) and 5703 (language), class 0.
  const numbers = conn.infoMessages.map((m) => [m.number, m.class]);
  assert.deepEqual(numbers.filter(([n]) => n === 5701 || n === 5703), [[5701, 0], [5703, 0]]);
  await close(conn);
});

test('encrypt: true with trustServerCertificate (TLS inside PRELOGIN)', async () => {
  const conn = await connect(DB, true);
  const r = await rows(conn, 'SELECT @v AS v, DB_NAME() AS db', [['v', TYPES.NVarChar, 'über TLS']]);
  assert.deepEqual(r, [['über TLS', DB]]);
  await close(conn);
});

test('typed parameters round trip (sp_executesql)', async () => {
  const conn = await connect();
  const guid = '6F9619FF-8B86-D011-B42D-00C04FD430C8';
  const dt2 = new Date(Date.UTC(2024, 1, 29, 13, 45, 30, 123));
  const r = await ok(
    conn,
    'SELECT @i AS i, @n AS n, @v AS v, @b AS b, @bi AS bi, @d AS d, @dt2 AS dt2, @g AS g, @vb AS vb, ' +
      "UPPER(@n) + N'!' AS un",
    [
      ['i', TYPES.Int, -2147483648],
      ['n', TYPES.NVarChar, 'Grüße 😀'],
      ['v', TYPES.VarChar, 'plain'],
      ['b', TYPES.Bit, true],
      ['bi', TYPES.BigInt, '9007199254740993'],
      ['d', TYPES.Decimal, 12345.678, { precision: 12, scale: 3 }],
      ['dt2', TYPES.DateTime2, dt2, { scale: 3 }],
      ['g', TYPES.UniqueIdentifier, guid],
      ['vb', TYPES.VarBinary, Buffer.from([0, 1, 0xfe, 0xff])],
    ],
  );
  assert.equal(r.sets.length, 1);
  const [row] = r.sets[0].rows;
  assert.equal(row[0], -2147483648);
  assert.equal(row[1], 'Grüße 😀');
  assert.equal(row[2], 'plain');
  assert.equal(row[3], true);
  assert.equal(row[4], '9007199254740993');
  assert.equal(row[5], 12345.678);
  assert.equal(row[6].toISOString(), dt2.toISOString());
  assert.equal(row[7], guid);
  assert.deepEqual(row[8], Buffer.from([0, 1, 0xfe, 0xff]));
  assert.equal(row[9], 'GRÜßE 😀!'); // SQL Server's UPPER keeps ß
  // The result columns have the parameters' declared types.
  assert.deepEqual(
    r.sets[0].columns.map((c) => c.type),
    ['IntN', 'NVarChar', 'VarChar', 'BitN', 'IntN', 'DecimalN', 'DateTime2', 'UniqueIdentifier', 'VarBinary', 'NVarChar'],
  );
  const dec = r.sets[0].columns[5].c;
  assert.equal(dec.precision, 12);
  assert.equal(dec.scale, 3);
  await close(conn);
});

test('typed parameters into a table and back', async () => {
  const conn = await connect();
  await ok(
    conn,
    'CREATE TABLE Typed (id INT PRIMARY KEY, n NVARCHAR(40), v VARCHAR(40), b BIT, bi BIGINT, ' +
      'd DECIMAL(18, 4), dt2 DATETIME2, g UNIQUEIDENTIFIER, vb VARBINARY(MAX), ti TINYINT, ' +
      'si SMALLINT, f FLOAT, r REAL, dt DATE, dtm DATETIME, nm NVARCHAR(MAX))',
    [],
    'execSqlBatch',
  );
  const insert =
    'INSERT INTO Typed VALUES (@id, @n, @v, @b, @bi, @d, @dt2, @g, @vb, @ti, @si, @f, @r, @dt, @dtm, @nm)';
  const blob = Buffer.alloc(3000, 0xab);
  const long = 'ü'.repeat(2000);
  const values = (id) => [
    ['id', TYPES.Int, id],
    ['n', TYPES.NVarChar, `név ${id} ✓`],
    ['v', TYPES.VarChar, `v${id}`],
    ['b', TYPES.Bit, id % 2 === 0],
    ['bi', TYPES.BigInt, -(2 ** 40) - id],
    ['d', TYPES.Decimal, -99999.0001 * id, { precision: 18, scale: 4 }],
    ['dt2', TYPES.DateTime2, new Date(Date.UTC(2030, 11, 31, 23, 59, 59, 999)), { scale: 7 }],
    ['g', TYPES.UniqueIdentifier, `00000000-0000-0000-0000-00000000000${id}`],
    ['vb', TYPES.VarBinary, blob],
    ['ti', TYPES.TinyInt, 255],
    ['si', TYPES.SmallInt, -32768],
    ['f', TYPES.Float, 1.5e300],
    ['r', TYPES.Real, 0.5],
    ['dt', TYPES.Date, new Date(Date.UTC(1999, 11, 31))],
    ['dtm', TYPES.DateTime, new Date(Date.UTC(2000, 0, 1, 12, 0, 0, 997))],
    ['nm', TYPES.NVarChar, long],
  ];
  for (const id of [1, 2]) {
    const r = await ok(conn, insert, values(id));
    assert.equal(r.rowCount, 1, 'INSERT rowCount');
  }
  const got = await rows(
    conn,
    'SELECT id, n, v, b, bi, d, dt2, g, vb, ti, si, f, r, dt, dtm, nm FROM Typed WHERE id = @id',
    [['id', TYPES.Int, 2]],
  );
  assert.equal(got.length, 1);
  const row = got[0];
  assert.equal(row[0], 2);
  assert.equal(row[1], 'név 2 ✓');
  assert.equal(row[2], 'v2');
  assert.equal(row[3], true);
  assert.equal(row[4], String(-(2 ** 40) - 2));
  assert.equal(row[5], -199998.0002);
  assert.equal(row[6].toISOString(), '2030-12-31T23:59:59.999Z');
  assert.equal(row[7], '00000000-0000-0000-0000-000000000002');
  assert.deepEqual(row[8], blob);
  assert.equal(row[9], 255);
  assert.equal(row[10], -32768);
  assert.equal(row[11], 1.5e300);
  assert.equal(row[12], 0.5);
  assert.equal(row[13].toISOString(), '1999-12-31T00:00:00.000Z');
  assert.equal(row[14].toISOString(), '2000-01-01T12:00:00.997Z');
  assert.equal(row[15], long);
  // NULL of each parameter type.
  const nulls = values(3).map(([name, type, _v, options]) => [name, type, name === 'id' ? 3 : null, options]);
  await ok(conn, insert, nulls);
  const n = await rows(conn, 'SELECT * FROM Typed WHERE id = 3');
  assert.deepEqual(n, [[3, ...Array(15).fill(null)]]);
  await close(conn);
});

test('rowCount of INSERT, UPDATE and DELETE', async () => {
  const conn = await connect();
  await ok(conn, 'CREATE TABLE Counted (id INT PRIMARY KEY, v INT)');
  let r = await ok(conn, 'INSERT INTO Counted VALUES (1, @a), (2, @a), (3, @b)', [
    ['a', TYPES.Int, 10],
    ['b', TYPES.Int, 30],
  ]);
  assert.equal(r.rowCount, 3, 'INSERT');
  r = await ok(conn, 'UPDATE Counted SET v = v + 1 WHERE v = @v', [['v', TYPES.Int, 10]]);
  assert.equal(r.rowCount, 2, 'UPDATE');
  r = await ok(conn, 'DELETE FROM Counted WHERE id = @id', [['id', TYPES.Int, 3]]);
  assert.equal(r.rowCount, 1, 'DELETE');
  r = await ok(conn, 'DELETE FROM Counted WHERE id = @id', [['id', TYPES.Int, 99]]);
  assert.equal(r.rowCount, 0, 'DELETE of no row');
  r = await ok(conn, 'SELECT id, v FROM Counted ORDER BY id');
  assert.equal(r.rowCount, 2, 'SELECT rowCount');
  assert.deepEqual(r.sets[0].rows, [[1, 11], [2, 11]]);
  // A batch: counts add up.
  r = await ok(conn, 'UPDATE Counted SET v = 0; DELETE FROM Counted WHERE id = 1', [], 'execSqlBatch');
  assert.equal(r.rowCount, 3, 'batch rowCount');
  await close(conn);
});

test('errors carry number and class', async () => {
  const conn = await connect();
  await ok(conn, 'CREATE TABLE Errs (id INT PRIMARY KEY)');
  await ok(conn, 'INSERT INTO Errs VALUES (@id)', [['id', TYPES.Int, 1]]);
  await expectError(conn, 'SELECT * FROM NoSuchTable', 208, 16);
  await expectError(conn, 'INSERT INTO Errs VALUES (@id)', 2627, 14, [['id', TYPES.Int, 1]]);
  await expectError(conn, 'SELECT @a / @b', 8134, 16, [
    ['a', TYPES.Int, 1],
    ['b', TYPES.Int, 0],
  ]);
  await expectError(conn, 'SELECT 1 +', 102, 15);
  await expectError(conn, 'SELECT @s + 1', 245, 16, [['s', TYPES.VarChar, 'abc']]);
  await expectError(conn, 'SELECT * FROM NoSuchTable', 208, 16, [], 'execSqlBatch');
  const e = await expectError(conn, 'SELECT 1/0', 8134, 16, [], 'execSqlBatch');
  assert.equal(e.message, 'Divide by zero error encountered.');
  // The connection goes on.
  assert.deepEqual(await rows(conn, 'SELECT COUNT(*) AS n FROM Errs'), [[1]]);
  await close(conn);
});

test('transactions: beginTransaction / commitTransaction / rollbackTransaction', async () => {
  const conn = await connect();
  await ok(conn, 'CREATE TABLE Tx (id INT PRIMARY KEY)');
  await tm(conn, 'beginTransaction');
  await ok(conn, 'INSERT INTO Tx VALUES (@id)', [['id', TYPES.Int, 1]]);
  assert.deepEqual(await rows(conn, 'SELECT @@TRANCOUNT'), [[1]]);
  await tm(conn, 'rollbackTransaction');
  assert.deepEqual(await rows(conn, 'SELECT COUNT(*), @@TRANCOUNT FROM Tx'), [[0, 0]]);
  await tm(conn, 'beginTransaction', 'named', ISOLATION_LEVEL.READ_COMMITTED);
  await ok(conn, 'INSERT INTO Tx VALUES (@id)', [['id', TYPES.Int, 2]]);
  await ok(conn, 'INSERT INTO Tx VALUES (3)', [], 'execSqlBatch');
  await tm(conn, 'commitTransaction');
  assert.deepEqual(await rows(conn, 'SELECT id FROM Tx ORDER BY id'), [[2], [3]]);
  // A duplicate key inside a transaction: the statement fails, the transaction stays.
  await tm(conn, 'beginTransaction');
  await ok(conn, 'INSERT INTO Tx VALUES (4)');
  await expectError(conn, 'INSERT INTO Tx VALUES (@id)', 2627, 14, [['id', TYPES.Int, 2]]);
  assert.deepEqual(await rows(conn, 'SELECT @@TRANCOUNT'), [[1]]);
  await tm(conn, 'commitTransaction');
  assert.deepEqual(await rows(conn, 'SELECT COUNT(*) FROM Tx'), [[3]]);
  // conn.transaction(): rolls back when the work fails.
  await new Promise((resolve, reject) => {
    conn.transaction((err, done) => {
      if (err) return reject(err);
      const req = new Request('INSERT INTO Tx VALUES (2)', (e) => {
        done(e, (e2) => (e2 ? reject(e2) : resolve()));
      });
      conn.execSql(req);
    });
  }).then(
    () => assert.fail('duplicate key did not fail the transaction'),
    (e) => assert.equal(e.number, 2627),
  );
  assert.deepEqual(await rows(conn, 'SELECT COUNT(*), @@TRANCOUNT FROM Tx'), [[3, 0]]);
  // Leaving with an open transaction rolls it back.
  await tm(conn, 'beginTransaction');
  await ok(conn, 'INSERT INTO Tx VALUES (99)');
  await close(conn);
  const other = await connect();
  assert.deepEqual(await rows(other, 'SELECT COUNT(*) FROM Tx WHERE id = 99'), [[0]]);
  await close(other);
});

test('prepare / execute / unprepare (sp_prepare, sp_execute)', async () => {
  const conn = await connect();
  await ok(conn, 'CREATE TABLE Prep (id INT PRIMARY KEY, name NVARCHAR(20))');
  const req = await new Promise((resolve, reject) => {
    const r = new Request('INSERT INTO Prep VALUES (@id, @name)', (err) => err && reject(err));
    r.addParameter('id', TYPES.Int);
    r.addParameter('name', TYPES.NVarChar);
    r.on('prepared', () => resolve(r));
    conn.prepare(r);
  });
  assert.ok(req.handle, 'a prepared handle');
  for (let id = 1; id <= 3; id++) {
    const count = await new Promise((resolve, reject) => {
      req.userCallback = (err, rowCount) => (err ? reject(err) : resolve(rowCount));
      conn.execute(req, { id, name: `n${id}` });
    });
    assert.equal(count, 1, 'prepared INSERT rowCount');
  }
  await new Promise((resolve) => {
    req.userCallback = () => resolve();
    conn.unprepare(req);
  });
  assert.deepEqual(await rows(conn, 'SELECT id, name FROM Prep ORDER BY id'), [[1, 'n1'], [2, 'n2'], [3, 'n3']]);
  await close(conn);
});

test('output parameters (RETURNVALUE)', async () => {
  const conn = await connect();
  const r = await ok(
    conn,
    'SET @doubled = @x * 2; SET @greeting = N\'hi \' + @name',
    [
      ['x', TYPES.Int, 21],
      ['name', TYPES.NVarChar, 'Zoë'],
    ],
    'execSql',
    [
      ['doubled', TYPES.Int],
      ['greeting', TYPES.NVarChar, null, { length: 50 }],
    ],
  );
  assert.equal(r.returns.doubled.value, 42);
  assert.equal(r.returns.greeting.value, 'hi Zoë');
  await close(conn);
});

test('batches: several result sets, PRINT, USE', async () => {
  const conn = await connect();
  let r = await ok(conn, "SELECT 1 AS a; SELECT 'x' AS b, 2 AS c", [], 'execSqlBatch');
  assert.deepEqual(r.sets.map((s) => s.columns.map((c) => c.name)), [['a'], ['b', 'c']]);
  assert.deepEqual(r.sets.map((s) => s.rows), [[[1]], [['x', 2]]]);
  conn.infoMessages = [];
  await ok(conn, "PRINT 'hello from PRINT'", [], 'execSqlBatch');
  const m = conn.infoMessages.find((x) => x.message === 'hello from PRINT');
  assert.ok(m, `PRINT message not among ${JSON.stringify(conn.infoMessages)}`);
  assert.equal(m.number, 0);
  assert.equal(m.class, 0);
  let changed = null;
  conn.on('databaseChange', (name) => (changed = name));
  conn.infoMessages = [];
  await ok(conn, 'USE master', [], 'execSqlBatch');
  assert.equal(changed, 'master', 'databaseChange event');
  assert.deepEqual(conn.infoMessages.map((x) => [x.number, x.class, x.message]), [
    [5701, 0, "Changed database context to 'master'."],
  ]);
  assert.deepEqual(await rows(conn, 'SELECT DB_NAME()'), [['master']]);
  await close(conn);
});

// ---------------------------------------------------------------------------------------

async function setup() {
  const conn = await connect('master');
  await run(conn, `DROP DATABASE ${DB}`, [], 'execSqlBatch');
  await ok(conn, `CREATE DATABASE ${DB}`, [], 'execSqlBatch');
  await close(conn);
}

async function main() {
  if (!PORT) throw new Error('--port is required');
  await setup();
  let passed = 0;
  let failed = 0;
  for (const t of TESTS) {
    if (ONLY && !t.name.includes(ONLY)) continue;
    try {
      await t.f();
      passed++;
      console.log(`ok   tedious ${t.name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL tedious ${t.name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.log(`FAIL tedious setup: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  },
);
