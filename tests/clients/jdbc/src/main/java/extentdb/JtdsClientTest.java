package extentdb;

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;

/**
 * jTDS 1.3.1 (the TDS driver of DBeaver's and SQuirreL's older SQL Server profiles, which
 * speaks TDS 7.1) against extentdb's TDS server.
 *
 * <pre>java -cp extentdb-jdbc-tests.jar extentdb.JtdsClientTest PORT [HOST]</pre>
 *
 * The sa password comes from $MSSQL_SA_PASSWORD. Logs in with ssl=off (LOGIN7 with no
 * PRELOGIN before it) and with ssl=request (PRELOGIN, TLS for the login only), then reads
 * results in TDS 7.1's layout: 2-byte UserTypes and line numbers, 4-byte DONE counts, ROW
 * with typed NULLs, (MAX) values as TEXT / NTEXT / IMAGE, DATE and DATETIME2 as text.
 * Prints one line per test, then "N passed, N failed"; exits 1 if any failed.
 */
public final class JtdsClientTest {
    private static String host = "127.0.0.1";
    private static int port;
    private static String password;
    private static final String DB = "JtdsClient";

    private static final Suite suite = new Suite("jtds");

    private static void test(String name, Suite.Body body) {
        suite.test(name, body);
    }

    static void eq(Object actual, Object expected, String what) {
        Suite.eq(actual, expected, what);
    }

    static Connection connect(String database, String ssl) throws SQLException {
        String url = "jdbc:jtds:sqlserver://" + host + ":" + port + "/" + database
                + ";ssl=" + ssl + ";loginTimeout=10;socketTimeout=60";
        return DriverManager.getConnection(url, "sa", password);
    }

    static Object scalar(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            if (!rs.next()) {
                throw new Suite.Failure(sql + ": no row");
            }
            return rs.getObject(1);
        }
    }

    static void defineTests() {
        test("ssl=off: LOGIN7 without PRELOGIN; TDS 7.1 results", () -> {
            try (Connection c = connect(DB, "off")) {
                eq(c.getMetaData().getDatabaseProductName(), "Microsoft SQL Server", "product");
                eq(scalar(c, "SELECT DB_NAME()"), DB, "DB_NAME()");
                eq(scalar(c, "SELECT 40 + 2"), 42, "an int");
            }
        });
        test("ssl=request: PRELOGIN, TLS for the login", () -> {
            try (Connection c = connect(DB, "request")) {
                eq(scalar(c, "SELECT SUSER_SNAME()"), "sa", "the login");
            }
        });
        test("rows, NULLs of every kind, update counts", () -> {
            try (Connection c = connect(DB, "off"); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE t (id INT PRIMARY KEY, v NVARCHAR(20), b BIGINT,"
                        + " m VARCHAR(MAX), n NVARCHAR(MAX), img VARBINARY(MAX), d DATE,"
                        + " d2 DATETIME2(3), f FLOAT, dec DECIMAL(10, 2))");
                eq(s.executeUpdate("INSERT INTO t VALUES (1, N'one', 10, REPLICATE('x', 5000),"
                        + " N'ünï', 0x0102, '2024-01-02', '2024-01-02 03:04:05.678', 1.5, 12.34),"
                        + " (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"), 2,
                        "insert count");
                eq(s.executeUpdate("UPDATE t SET b = b + 1 WHERE id = 1"), 1, "update count");
                try (ResultSet rs = s.executeQuery("SELECT * FROM t ORDER BY id")) {
                    ResultSetMetaData md = rs.getMetaData();
                    eq(md.getColumnCount(), 10, "columns");
                    eq(md.getColumnName(2), "v", "a column's name");
                    eq(rs.next(), true, "row 1");
                    eq(rs.getInt(1), 1, "id");
                    eq(rs.getString(2), "one", "nvarchar");
                    eq(rs.getLong(3), 11L, "bigint");
                    eq(rs.getString(4).length(), 5000, "varchar(max) as text");
                    eq(rs.getString(5), "ünï", "nvarchar(max) as ntext");
                    eq(rs.getBytes(6).length, 2, "varbinary(max) as image");
                    eq(rs.getString(7), "2024-01-02", "date as text");
                    eq(rs.getString(8), "2024-01-02 03:04:05.678", "datetime2 as text");
                    eq(rs.getDouble(9), 1.5, "float");
                    eq(rs.getBigDecimal(10).toPlainString(), "12.34", "decimal");
                    eq(rs.next(), true, "row 2");
                    for (int i = 2; i <= 10; i++) {
                        eq(rs.getObject(i), null, "NULL in column " + i);
                    }
                    eq(rs.next(), false, "two rows");
                }
            }
        });
        test("prepared statements and errors", () -> {
            try (Connection c = connect(DB, "off")) {
                try (PreparedStatement p = c.prepareStatement("SELECT v FROM t WHERE id = ?")) {
                    p.setInt(1, 1);
                    try (ResultSet rs = p.executeQuery()) {
                        eq(rs.next(), true, "a row");
                        eq(rs.getString(1), "one", "the value");
                    }
                }
                try (Statement s = c.createStatement()) {
                    s.executeQuery("SELECT 1 / 0");
                    throw new Suite.Failure("no error");
                } catch (SQLException e) {
                    eq(e.getErrorCode(), 8134, "divide by zero");
                }
                try (Statement s = c.createStatement()) {
                    s.execute("INSERT INTO t (id) VALUES (1)");
                    throw new Suite.Failure("no error");
                } catch (SQLException e) {
                    eq(e.getErrorCode(), 2627, "duplicate key");
                }
            }
        });
        test("DatabaseMetaData through sp_tables, sp_columns, sp_pkeys, sp_fkeys, sp_datatype_info", () -> {
            try (Connection c = connect(DB, "off"); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE parent (pid INT NOT NULL PRIMARY KEY, label NVARCHAR(30) NULL)");
                s.execute("CREATE TABLE child (cid INT IDENTITY(1, 1) PRIMARY KEY, pid INT NOT NULL,"
                        + " CONSTRAINT fk_child_parent FOREIGN KEY (pid) REFERENCES parent (pid))");
                DatabaseMetaData md = c.getMetaData();
                try (ResultSet rs = md.getTables(DB, "dbo", "par%", new String[] {"TABLE"})) {
                    eq(rs.next(), true, "getTables: a table");
                    eq(rs.getString("TABLE_CAT"), DB, "TABLE_CAT");
                    eq(rs.getString("TABLE_SCHEM"), "dbo", "TABLE_SCHEM");
                    eq(rs.getString("TABLE_NAME"), "parent", "TABLE_NAME");
                    eq(rs.getString("TABLE_TYPE"), "TABLE", "TABLE_TYPE");
                    eq(rs.next(), false, "getTables: one table matches par%");
                }
                try (ResultSet rs = md.getTables(null, null, "%", null)) {
                    int n = 0;
                    while (rs.next()) {
                        n++;
                    }
                    eq(n, 3, "getTables: t, parent and child");
                }
                try (ResultSet rs = md.getColumns(DB, "dbo", "parent", "%")) {
                    eq(rs.next(), true, "getColumns: pid");
                    eq(rs.getString("COLUMN_NAME"), "pid", "COLUMN_NAME");
                    eq(rs.getInt("DATA_TYPE"), Types.INTEGER, "int's DATA_TYPE");
                    eq(rs.getString("TYPE_NAME"), "int", "TYPE_NAME");
                    eq(rs.getInt("NULLABLE"), DatabaseMetaData.columnNoNulls, "NULLABLE");
                    eq(rs.getInt("ORDINAL_POSITION"), 1, "ORDINAL_POSITION");
                    eq(rs.getString("IS_NULLABLE"), "NO", "IS_NULLABLE");
                    eq(rs.next(), true, "getColumns: label");
                    eq(rs.getString("COLUMN_NAME"), "label", "second column");
                    eq(rs.getString("TYPE_NAME"), "nvarchar", "nvarchar's TYPE_NAME");
                    eq(rs.getInt("COLUMN_SIZE"), 30, "nvarchar(30)'s COLUMN_SIZE");
                    eq(rs.getString("IS_NULLABLE"), "YES", "nullable");
                    eq(rs.next(), false, "two columns");
                }
                try (ResultSet rs = md.getColumns(DB, "dbo", "child", "cid")) {
                    eq(rs.next(), true, "getColumns: cid");
                    eq(rs.getString("TYPE_NAME"), "int identity", "an IDENTITY column");
                }
                try (ResultSet rs = md.getPrimaryKeys(DB, "dbo", "child")) {
                    eq(rs.next(), true, "getPrimaryKeys: a key column");
                    eq(rs.getString("TABLE_NAME"), "child", "key's TABLE_NAME");
                    eq(rs.getString("COLUMN_NAME"), "cid", "key's COLUMN_NAME");
                    eq(rs.getInt("KEY_SEQ"), 1, "KEY_SEQ");
                    eq(rs.next(), false, "one key column");
                }
                try (ResultSet rs = md.getImportedKeys(DB, "dbo", "child")) {
                    eq(rs.next(), true, "getImportedKeys: the foreign key");
                    eq(rs.getString("PKTABLE_NAME"), "parent", "PKTABLE_NAME");
                    eq(rs.getString("PKCOLUMN_NAME"), "pid", "PKCOLUMN_NAME");
                    eq(rs.getString("FKTABLE_NAME"), "child", "FKTABLE_NAME");
                    eq(rs.getString("FKCOLUMN_NAME"), "pid", "FKCOLUMN_NAME");
                    eq(rs.getInt("KEY_SEQ"), 1, "KEY_SEQ");
                    eq(rs.getString("FK_NAME"), "fk_child_parent", "FK_NAME");
                    eq(rs.next(), false, "one foreign key");
                }
                try (ResultSet rs = md.getTypeInfo()) {
                    boolean sawInt = false;
                    boolean sawNvarchar = false;
                    while (rs.next()) {
                        String name = rs.getString("TYPE_NAME");
                        if (name.equals("int")) {
                            sawInt = rs.getInt("DATA_TYPE") == Types.INTEGER;
                        }
                        if (name.equals("nvarchar")) {
                            sawNvarchar = rs.getInt("PRECISION") == 4000;
                        }
                    }
                    eq(sawInt, true, "getTypeInfo: int as INTEGER");
                    eq(sawNvarchar, true, "getTypeInfo: nvarchar of 4000 characters");
                }
            }
        });
        test("transactions", () -> {
            try (Connection c = connect(DB, "off")) {
                c.setAutoCommit(false);
                try (Statement s = c.createStatement()) {
                    s.executeUpdate("INSERT INTO t (id) VALUES (3)");
                }
                c.rollback();
                c.setAutoCommit(true);
                eq(scalar(c, "SELECT COUNT(*) FROM t"), 2, "rolled back");
            }
        });
    }

    public static void main(String[] args) throws Exception {
        port = Integer.parseInt(args[0]);
        if (args.length > 1) {
            host = args[1];
        }
        password = System.getenv().getOrDefault("MSSQL_SA_PASSWORD", "");
        Class.forName("net.sourceforge.jtds.jdbc.Driver");
        try (Connection c = connect("master", "off"); Statement s = c.createStatement()) {
            s.execute("IF DB_ID('" + DB + "') IS NOT NULL DROP DATABASE " + DB);
            s.execute("CREATE DATABASE " + DB);
        }
        defineTests();
        suite.runAndExit(null);
    }
}
