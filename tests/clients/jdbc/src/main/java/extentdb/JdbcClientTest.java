package extentdb;

import com.microsoft.sqlserver.jdbc.SQLServerException;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.Arrays;

/**
 * mssql-jdbc against extentdb's TDS server.
 *
 * <pre>java -jar extentdb-jdbc-tests.jar PORT [HOST] [filter]</pre>
 *
 * The sa password comes from $MSSQL_SA_PASSWORD. Statement runs SQL batches;
 * PreparedStatement runs sp_executesql on its first execution, then sp_prepexec, then
 * sp_execute, and executeBatch sends several RPC calls in one request. setAutoCommit(false)
 * is SET IMPLICIT_TRANSACTIONS ON, commit/rollback are IF @@TRANCOUNT > 0 COMMIT/ROLLBACK
 * TRAN batches. One test connects with encrypt=true (TLS inside PRELOGIN, the server's
 * self-signed certificate trusted); the others with encrypt=false. Each test asserts values,
 * update counts, metadata and, for errors, SQL Server's error number (getErrorCode) and
 * severity. Prints one line per test, then "N passed, N failed"; exits 1 if any failed.
 */
public final class JdbcClientTest {
    private static String host = "127.0.0.1";
    private static int port;
    private static String password;
    private static final String DB = "JdbcClient";

    private static final Suite suite = new Suite("jdbc");

    private static void test(String name, Suite.Body body) {
        suite.test(name, body);
    }

    static void eq(Object actual, Object expected, String what) {
        Suite.eq(actual, expected, what);
    }

    static void check(boolean cond, String what) {
        Suite.check(cond, what);
    }

    static Connection connect(String database) throws SQLException {
        String url = "jdbc:sqlserver://" + host + ":" + port + ";databaseName=" + database
                + ";encrypt=false;trustServerCertificate=true;loginTimeout=10";
        return DriverManager.getConnection(url, "sa", password);
    }

    static Connection connect() throws SQLException {
        return connect(DB);
    }

    static Object scalar(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            check(rs.next(), sql + ": no row");
            Object v = rs.getObject(1);
            check(!rs.next(), sql + ": more than one row");
            return v;
        }
    }

    /** Runs sql expecting a server error; checks getErrorCode() and the severity. */
    static SQLServerException expectError(Statement s, String sql, int number, int severity) {
        try {
            boolean rs = s.execute(sql);
            // Errors after a first result come with getMoreResults.
            while (rs || s.getUpdateCount() != -1) {
                rs = s.getMoreResults();
            }
        } catch (SQLServerException e) {
            checkError(e, sql, number, severity);
            return e;
        } catch (SQLException e) {
            throw new Suite.Failure(sql + ": not a SQLServerException: " + e);
        }
        throw new Suite.Failure(sql + ": expected error " + number + ", got none");
    }

    static void checkError(SQLServerException e, String what, int number, int severity) {
        eq(e.getErrorCode(), number, what + ": getErrorCode() (" + e.getMessage() + ")");
        check(e.getSQLServerError() != null, what + ": no SQLServerError");
        eq(e.getSQLServerError().getErrorNumber(), number, what + ": error number");
        eq(e.getSQLServerError().getErrorSeverity(), severity, what + ": severity");
    }

    // ------------------------------------------------------------------------------------

    static void defineTests() {
        test("connect with databaseName; catalog", () -> {
            try (Connection c = connect()) {
                eq(c.getCatalog(), DB, "getCatalog()");
                eq(scalar(c, "SELECT DB_NAME()"), DB, "DB_NAME()");
                eq(c.getMetaData().getDatabaseMajorVersion() >= 9, true, "server major version");
                c.setCatalog("master");
                eq(c.getCatalog(), "master", "getCatalog() after setCatalog");
                eq(scalar(c, "SELECT DB_NAME()"), "master", "DB_NAME() after setCatalog");
            }
        });

        test("encrypt=true with trustServerCertificate (TLS inside PRELOGIN)", () -> {
            String url = "jdbc:sqlserver://" + host + ":" + port + ";databaseName=" + DB
                    + ";encrypt=true;trustServerCertificate=true;loginTimeout=10";
            try (Connection c = DriverManager.getConnection(url, "sa", password);
                    PreparedStatement p = c.prepareStatement("SELECT ? AS v, DB_NAME() AS db")) {
                p.setString(1, "über TLS");
                try (ResultSet rs = p.executeQuery()) {
                    check(rs.next(), "a row");
                    eq(rs.getString(1), "über TLS", "value over TLS");
                    eq(rs.getString(2), DB, "database over TLS");
                }
            }
        });

        test("wrong password: 18456", () -> {
            String url = "jdbc:sqlserver://" + host + ":" + port + ";encrypt=false;loginTimeout=10";
            try {
                DriverManager.getConnection(url, "sa", password + "x").close();
            } catch (SQLServerException e) {
                checkError(e, "login", 18456, 14);
                return;
            }
            throw new Suite.Failure("login with a wrong password succeeded");
        });

        test("every column type: values and getMetaData", () -> {
            try (Connection c = connect(); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE AllTypes (id INT NOT NULL PRIMARY KEY, b BIT, ti TINYINT, "
                        + "si SMALLINT, bi BIGINT, d DECIMAL(10, 3), f FLOAT, r REAL, c CHAR(5), "
                        + "vc VARCHAR(20), nc NCHAR(4), nv NVARCHAR(30), vm VARCHAR(MAX), "
                        + "nm NVARCHAR(MAX), bn BINARY(4), vb VARBINARY(10), vbm VARBINARY(MAX), "
                        + "dt DATE, dtm DATETIME, dt2 DATETIME2, g UNIQUEIDENTIFIER)");
                int n = s.executeUpdate("INSERT INTO AllTypes VALUES (1, 1, 255, -32768, "
                        + "9223372036854775807, -1234567.891, 1.5e300, 3.25, 'ab', 'hello', N'αβ', "
                        + "N'Grüße 😀', REPLICATE('x', 3000), REPLICATE(N'é', 1000), 0x01020304, "
                        + "0xDEADBEEF, 0x00FF, '2024-02-29', '2024-02-29 13:45:30.997', "
                        + "'2024-02-29 13:45:30.1234567', '6F9619FF-8B86-D011-B42D-00C04FD430C8')");
                eq(n, 1, "INSERT count");
                eq(s.executeUpdate("INSERT INTO AllTypes (id) VALUES (2)"), 1, "INSERT of NULLs");
                try (ResultSet rs = s.executeQuery("SELECT * FROM AllTypes ORDER BY id")) {
                    ResultSetMetaData md = rs.getMetaData();
                    eq(md.getColumnCount(), 21, "column count");
                    Object[][] expected = {
                        // name, java.sql.Types, type name, precision, scale
                        {"id", Types.INTEGER, "int", 10, 0},
                        {"b", Types.BIT, "bit", 1, 0},
                        {"ti", Types.TINYINT, "tinyint", 3, 0},
                        {"si", Types.SMALLINT, "smallint", 5, 0},
                        {"bi", Types.BIGINT, "bigint", 19, 0},
                        {"d", Types.DECIMAL, "decimal", 10, 3},
                        {"f", Types.DOUBLE, "float", 15, 0},
                        {"r", Types.REAL, "real", 7, 0},
                        {"c", Types.CHAR, "char", 5, 0},
                        {"vc", Types.VARCHAR, "varchar", 20, 0},
                        {"nc", Types.NCHAR, "nchar", 4, 0},
                        {"nv", Types.NVARCHAR, "nvarchar", 30, 0},
                        {"vm", Types.VARCHAR, "varchar", Integer.MAX_VALUE, 0},
                        {"nm", Types.NVARCHAR, "nvarchar", 1073741823, 0},
                        {"bn", Types.BINARY, "binary", 4, 0},
                        {"vb", Types.VARBINARY, "varbinary", 10, 0},
                        {"vbm", Types.VARBINARY, "varbinary", Integer.MAX_VALUE, 0},
                        {"dt", Types.DATE, "date", 10, 0},
                        {"dtm", Types.TIMESTAMP, "datetime", 23, 3},
                        {"dt2", Types.TIMESTAMP, "datetime2", 27, 7},
                        {"g", Types.CHAR, "uniqueidentifier", 36, 0},
                    };
                    for (int i = 0; i < expected.length; i++) {
                        Object[] e = expected[i];
                        String col = (String) e[0];
                        eq(md.getColumnName(i + 1), col, "column " + (i + 1) + " name");
                        eq(md.getColumnType(i + 1), e[1], col + " getColumnType");
                        eq(md.getColumnTypeName(i + 1), e[2], col + " getColumnTypeName");
                        eq(md.getPrecision(i + 1), e[3], col + " getPrecision");
                        eq(md.getScale(i + 1), e[4], col + " getScale");
                    }
                    check(rs.next(), "row 1");
                    eq(rs.getInt("id"), 1, "id");
                    eq(rs.getBoolean("b"), true, "bit");
                    eq(rs.getShort("ti"), (short) 255, "tinyint");
                    eq(rs.getShort("si"), (short) -32768, "smallint");
                    eq(rs.getLong("bi"), Long.MAX_VALUE, "bigint");
                    eq(rs.getBigDecimal("d"), new BigDecimal("-1234567.891"), "decimal");
                    eq(rs.getDouble("f"), 1.5e300, "float");
                    eq(rs.getFloat("r"), 3.25f, "real");
                    eq(rs.getString("c"), "ab   ", "char");
                    eq(rs.getString("vc"), "hello", "varchar");
                    eq(rs.getString("nc"), "αβ  ", "nchar");
                    eq(rs.getString("nv"), "Grüße 😀", "nvarchar");
                    eq(rs.getString("vm"), "x".repeat(3000), "varchar(max)");
                    eq(rs.getString("nm"), "é".repeat(1000), "nvarchar(max)");
                    eq(rs.getBytes("bn"), new byte[] {1, 2, 3, 4}, "binary");
                    eq(rs.getBytes("vb"), new byte[] {(byte) 0xde, (byte) 0xad, (byte) 0xbe, (byte) 0xef}, "varbinary");
                    eq(rs.getBytes("vbm"), new byte[] {0, (byte) 0xff}, "varbinary(max)");
                    eq(rs.getDate("dt").toString(), "2024-02-29", "date");
                    eq(rs.getTimestamp("dtm").toString(), "2024-02-29 13:45:30.997", "datetime");
                    eq(rs.getTimestamp("dt2").toString(), "2024-02-29 13:45:30.1234567", "datetime2");
                    eq(rs.getString("g"), "6F9619FF-8B86-D011-B42D-00C04FD430C8", "uniqueidentifier");
                    check(rs.next(), "row 2");
                    for (int i = 2; i <= 21; i++) {
                        eq(rs.getObject(i), null, "NULL " + md.getColumnName(i));
                        check(rs.wasNull(), "wasNull " + md.getColumnName(i));
                    }
                    check(!rs.next(), "two rows");
                }
            }
        });

        test("expression metadata: CAST, parameters, N'' literals", () -> {
            try (Connection c = connect();
                    PreparedStatement p = c.prepareStatement(
                            "SELECT CAST(NULL AS DECIMAL(9, 2)) AS d, CAST(NULL AS NVARCHAR(10)) AS n, "
                            + "N'Grüße 😀' AS u, ? AS p")) {
                p.setString(1, "Ωmega");
                try (ResultSet rs = p.executeQuery()) {
                    ResultSetMetaData md = rs.getMetaData();
                    eq(md.getColumnTypeName(1), "decimal", "CAST(NULL AS DECIMAL) type");
                    eq(md.getPrecision(1), 9, "CAST(NULL AS DECIMAL(9,2)) precision");
                    eq(md.getScale(1), 2, "CAST(NULL AS DECIMAL(9,2)) scale");
                    eq(md.getColumnTypeName(2), "nvarchar", "CAST(NULL AS NVARCHAR) type");
                    eq(md.getColumnTypeName(3), "nvarchar", "N'' literal type");
                    eq(md.getColumnTypeName(4), "nvarchar", "setString parameter type");
                    check(rs.next(), "a row");
                    eq(rs.getBigDecimal(1), null, "NULL decimal");
                    eq(rs.getString(3), "Grüße 😀", "N'' literal");
                    eq(rs.getString(4), "Ωmega", "parameter");
                }
            }
        });

        test("PreparedStatement: setInt/setString/setBigDecimal/setTimestamp/setBytes/setNull", () -> {
            try (Connection c = connect(); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE Prep (id INT PRIMARY KEY, name NVARCHAR(40), code VARCHAR(10), "
                        + "amount DECIMAL(18, 4), at DATETIME2, data VARBINARY(100), flag BIT, big BIGINT, "
                        + "day DATE, f FLOAT)");
                try (PreparedStatement p = c.prepareStatement(
                        "INSERT INTO Prep VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
                    // Five executions: sp_executesql, then sp_prepexec, then sp_execute.
                    for (int i = 1; i <= 5; i++) {
                        p.setInt(1, i);
                        p.setString(2, "név " + i + " ✓");
                        p.setString(3, "c" + i);
                        p.setBigDecimal(4, new BigDecimal("-12345.6789").multiply(BigDecimal.valueOf(i)));
                        p.setTimestamp(5, Timestamp.valueOf("2030-12-31 23:59:59.1234567"));
                        p.setBytes(6, new byte[] {(byte) i, 0, (byte) 0xff});
                        p.setBoolean(7, i % 2 == 0);
                        p.setLong(8, -(1L << 40) - i);
                        p.setDate(9, java.sql.Date.valueOf("1999-12-31"));
                        p.setDouble(10, 0.1 * i);
                        eq(p.executeUpdate(), 1, "prepared INSERT count, execution " + i);
                    }
                    p.setInt(1, 6);
                    p.setNull(2, Types.NVARCHAR);
                    p.setNull(3, Types.VARCHAR);
                    p.setNull(4, Types.DECIMAL);
                    p.setNull(5, Types.TIMESTAMP);
                    p.setNull(6, Types.VARBINARY);
                    p.setNull(7, Types.BIT);
                    p.setNull(8, Types.BIGINT);
                    p.setNull(9, Types.DATE);
                    p.setNull(10, Types.DOUBLE);
                    eq(p.executeUpdate(), 1, "INSERT of NULLs");
                }
                try (PreparedStatement q = c.prepareStatement(
                        "SELECT id, name, code, amount, at, data, flag, big, day, f FROM Prep WHERE id = ?")) {
                    for (int i = 1; i <= 5; i++) {
                        q.setInt(1, i);
                        try (ResultSet rs = q.executeQuery()) {
                            check(rs.next(), "row " + i);
                            eq(rs.getString("name"), "név " + i + " ✓", "name " + i);
                            eq(rs.getString("code"), "c" + i, "code " + i);
                            eq(rs.getBigDecimal("amount"),
                                    new BigDecimal("-12345.6789").multiply(BigDecimal.valueOf(i)), "amount " + i);
                            eq(rs.getTimestamp("at"), Timestamp.valueOf("2030-12-31 23:59:59.1234567"), "at " + i);
                            eq(rs.getBytes("data"), new byte[] {(byte) i, 0, (byte) 0xff}, "data " + i);
                            eq(rs.getBoolean("flag"), i % 2 == 0, "flag " + i);
                            eq(rs.getLong("big"), -(1L << 40) - i, "big " + i);
                            eq(rs.getDate("day").toString(), "1999-12-31", "day " + i);
                            eq(rs.getDouble("f"), 0.1 * i, "f " + i);
                            check(!rs.next(), "one row " + i);
                        }
                    }
                    q.setInt(1, 6);
                    try (ResultSet rs = q.executeQuery()) {
                        check(rs.next(), "NULL row");
                        for (int col = 2; col <= 10; col++) {
                            eq(rs.getObject(col), null, "NULL column " + col);
                        }
                    }
                }
                // Parameters in expressions and predicates.
                try (PreparedStatement q = c.prepareStatement(
                        "SELECT COUNT(*) FROM Prep WHERE amount < ? AND name LIKE ?")) {
                    q.setBigDecimal(1, new BigDecimal("-20000"));
                    q.setString(2, "név%");
                    try (ResultSet rs = q.executeQuery()) {
                        check(rs.next(), "count row");
                        eq(rs.getInt(1), 4, "rows matching parameters");
                    }
                }
            }
        });

        test("executeUpdate counts; Statement and PreparedStatement batches", () -> {
            try (Connection c = connect(); Statement s = c.createStatement()) {
                // executeUpdate of DDL is 0: the DONE names the statement (CurCmd 198 for
                // CREATE TABLE), which mssql-jdbc takes as DDL.
                eq(s.executeUpdate("CREATE TABLE Counts (id INT PRIMARY KEY, v INT)"), 0, "CREATE TABLE");
                eq(s.executeUpdate("INSERT INTO Counts VALUES (1, 10), (2, 20), (3, 30)"), 3, "multi-row INSERT");
                eq(s.executeUpdate("UPDATE Counts SET v = v + 1 WHERE id >= 2"), 2, "UPDATE");
                eq(s.executeUpdate("UPDATE Counts SET v = 0 WHERE id = 99"), 0, "UPDATE of no row");
                eq(s.executeUpdate("DELETE FROM Counts WHERE id = 3"), 1, "DELETE");
                try (PreparedStatement p = c.prepareStatement("INSERT INTO Counts VALUES (?, ?)")) {
                    for (int i = 10; i < 15; i++) {
                        p.setInt(1, i);
                        p.setInt(2, i * 100);
                        p.addBatch();
                    }
                    eq(Arrays.toString(p.executeBatch()), "[1, 1, 1, 1, 1]", "PreparedStatement batch counts");
                }
                s.addBatch("INSERT INTO Counts VALUES (20, 0)");
                s.addBatch("UPDATE Counts SET v = -1 WHERE id >= 10");
                s.addBatch("DELETE FROM Counts WHERE id = 20");
                eq(Arrays.toString(s.executeBatch()), "[1, 6, 1]", "Statement batch counts");
                eq(scalar(c, "SELECT COUNT(*) FROM Counts"), 7, "rows at the end");
                try (PreparedStatement p = c.prepareStatement("DELETE FROM Counts WHERE v = ?")) {
                    p.setInt(1, -1);
                    eq(p.executeUpdate(), 5, "prepared DELETE count");
                }
            }
        });

        test("autocommit off: commit and rollback", () -> {
            try (Connection c = connect(); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE Tx (id INT PRIMARY KEY)");
                c.setAutoCommit(false);
                s.executeUpdate("INSERT INTO Tx VALUES (1)");
                eq(scalar(c, "SELECT @@TRANCOUNT"), 1, "@@TRANCOUNT after a change with autocommit off");
                c.rollback();
                eq(scalar(c, "SELECT COUNT(*) FROM Tx"), 0, "rows after rollback");
                try (PreparedStatement p = c.prepareStatement("INSERT INTO Tx VALUES (?)")) {
                    p.setInt(1, 2);
                    p.executeUpdate();
                    p.setInt(1, 3);
                    p.executeUpdate();
                }
                c.commit();
                // An error inside the transaction: the statement fails, the transaction stays.
                s.executeUpdate("INSERT INTO Tx VALUES (4)");
                expectError(s, "INSERT INTO Tx VALUES (2)", 2627, 14);
                c.commit();
                c.setAutoCommit(true);
                eq(scalar(c, "SELECT @@TRANCOUNT"), 0, "@@TRANCOUNT with autocommit back on");
            }
            try (Connection other = connect()) {
                eq(scalar(other, "SELECT COUNT(*) FROM Tx"), 3, "committed rows seen by another connection");
            }
            // A connection closed inside a transaction rolls it back.
            try (Connection c = connect(); Statement s = c.createStatement()) {
                c.setAutoCommit(false);
                s.executeUpdate("INSERT INTO Tx VALUES (99)");
            }
            try (Connection other = connect()) {
                eq(scalar(other, "SELECT COUNT(*) FROM Tx WHERE id = 99"), 0, "uncommitted row after close");
            }
        });

        test("SQLException.getErrorCode() and severity", () -> {
            try (Connection c = connect(); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE Errs (id INT PRIMARY KEY, v VARCHAR(3) NOT NULL)");
                s.execute("INSERT INTO Errs VALUES (1, 'a')");
                expectError(s, "SELECT * FROM NoSuchTable", 208, 16);
                expectError(s, "SELECT 1/0", 8134, 16);
                expectError(s, "INSERT INTO Errs VALUES (1, 'b')", 2627, 14);
                expectError(s, "SELECT 1 +", 102, 15);
                expectError(s, "SELECT nosuchcolumn FROM Errs", 207, 16);
                expectError(s, "INSERT INTO Errs (id) VALUES (2)", 515, 16);
                expectError(s, "INSERT INTO Errs VALUES (3, 'toolong')", 2628, 16);
                expectError(s, "SELECT CAST('abc' AS INT)", 245, 16);
                // Through the RPC path.
                try (PreparedStatement p = c.prepareStatement("SELECT ? / ?")) {
                    p.setInt(1, 1);
                    p.setInt(2, 0);
                    try (ResultSet rs = p.executeQuery()) {
                        rs.next();
                        throw new Suite.Failure("prepared divide by zero: no error");
                    } catch (SQLServerException e) {
                        checkError(e, "prepared SELECT ? / ?", 8134, 16);
                    }
                }
                try (PreparedStatement p = c.prepareStatement("INSERT INTO Errs VALUES (?, ?)")) {
                    p.setInt(1, 1);
                    p.setString(2, "x");
                    try {
                        p.executeUpdate();
                        throw new Suite.Failure("prepared duplicate key: no error");
                    } catch (SQLServerException e) {
                        checkError(e, "prepared INSERT duplicate", 2627, 14);
                    }
                }
                eq(scalar(c, "SELECT COUNT(*) FROM Errs"), 1, "rows after the errors");
            }
        });

        test("several result sets; PRINT as SQLWarning", () -> {
            try (Connection c = connect(); Statement s = c.createStatement()) {
                check(s.execute("SELECT 1 AS a; SELECT 'x' AS b, 2 AS c"), "first result is a result set");
                try (ResultSet rs = s.getResultSet()) {
                    eq(rs.getMetaData().getColumnName(1), "a", "first set's column");
                    check(rs.next(), "first set's row");
                    eq(rs.getInt(1), 1, "first set's value");
                }
                check(s.getMoreResults(), "second result is a result set");
                try (ResultSet rs = s.getResultSet()) {
                    eq(rs.getMetaData().getColumnCount(), 2, "second set's columns");
                    check(rs.next(), "second set's row");
                    eq(rs.getString(1), "x", "second set's value");
                }
                check(!s.getMoreResults() && s.getUpdateCount() == -1, "no third result");
                s.execute("PRINT 'hello from PRINT'");
                SQLWarning w = s.getWarnings();
                check(w != null, "PRINT gave no SQLWarning");
                eq(w.getMessage(), "hello from PRINT", "PRINT text");
                eq(w.getErrorCode(), 0, "PRINT error code");
            }
        });
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: JdbcClientTest PORT [HOST] [filter]");
            System.exit(2);
        }
        port = Integer.parseInt(args[0]);
        if (args.length > 1) {
            host = args[1];
        }
        String filter = args.length > 2 ? args[2] : null;
        password = System.getenv().getOrDefault("MSSQL_SA_PASSWORD", "");
        try (Connection c = connect("master"); Statement s = c.createStatement()) {
            try {
                s.execute("DROP DATABASE " + DB);
            } catch (SQLException ignored) {
                // Not there yet.
            }
            s.execute("CREATE DATABASE " + DB);
        }
        defineTests();
        suite.runAndExit(filter);
    }
}
