//! T-SQL constructs a query processor for SQL Server must read, one small text each, put
//! to both parsers. For sqlparser, "preserved" means the construct's marker survives
//! printing the AST back (`Display`), i.e. the AST kept it rather than dropping it.

/// A construct: its name, a text using it, and a marker its printed AST must still hold.
pub struct Construct {
    pub name: &'static str,
    pub text: &'static str,
    pub marker: &'static str,
}

const fn c(name: &'static str, text: &'static str, marker: &'static str) -> Construct {
    Construct { name, text, marker }
}

pub const CONSTRUCTS: &[Construct] = &[
    c("try_catch", "BEGIN TRY\n  SELECT 1 / 0;\nEND TRY\nBEGIN CATCH\n  SELECT ERROR_NUMBER();\nEND CATCH;", "CATCH"),
    c("declare_table_variable", "DECLARE @t TABLE (id INT PRIMARY KEY, v NVARCHAR(20));\nINSERT INTO @t VALUES (1, N'a');\nSELECT id, v FROM @t;", "TABLE"),
    c("create_procedure_no_parameters", "CREATE PROCEDURE dbo.p AS\nBEGIN\n  SELECT 1;\nEND", "PROCEDURE"),
    c("alter_procedure", "ALTER PROCEDURE dbo.p AS\nBEGIN\n  SELECT 1;\nEND", "PROCEDURE"),
    c("create_procedure", "CREATE PROCEDURE dbo.p @id INT, @name NVARCHAR(50) OUTPUT AS\nBEGIN\n  SET NOCOUNT ON;\n  SELECT @name = name FROM dbo.t WHERE id = @id;\nEND", "OUTPUT"),
    c("cursor_plain", "DECLARE c CURSOR FOR SELECT name FROM sys.databases;\nOPEN c;\nFETCH NEXT FROM c INTO @n;\nCLOSE c;\nDEALLOCATE c;", "CURSOR"),
    c("cursor", "DECLARE c CURSOR LOCAL FAST_FORWARD FOR SELECT name FROM sys.databases;\nOPEN c;\nFETCH NEXT FROM c INTO @n;\nWHILE @@FETCH_STATUS = 0\nBEGIN\n  PRINT @n;\n  FETCH NEXT FROM c INTO @n;\nEND;\nCLOSE c;\nDEALLOCATE c;", "FAST_FORWARD"),
    c("table_hint_nolock", "SELECT k FROM kv WITH (NOLOCK) WHERE k = 1;", "NOLOCK"),
    c("table_hints_update", "UPDATE kv WITH (ROWLOCK, UPDLOCK) SET x = 1 WHERE k = 1;", "UPDLOCK"),
    c("option_maxrecursion", "WITH n AS (SELECT 1 AS i UNION ALL SELECT i + 1 FROM n WHERE i < 200)\nSELECT i FROM n OPTION (MAXRECURSION 200);", "MAXRECURSION"),
    c("top_with_ties", "SELECT TOP (5) WITH TIES k FROM kv ORDER BY x;", "WITH TIES"),
    c("top_percent", "SELECT TOP (10) PERCENT k FROM kv ORDER BY x;", "PERCENT"),
    c("output_inserted", "INSERT INTO t (v) OUTPUT inserted.* VALUES (1);", "INSERTED"),
    c("output_deleted_into", "DELETE FROM t OUTPUT deleted.id INTO @gone WHERE id = 1;", "DELETED"),
    c("merge", "MERGE INTO t AS d USING s ON d.id = s.id\nWHEN MATCHED THEN UPDATE SET d.v = s.v\nWHEN NOT MATCHED BY TARGET THEN INSERT (id, v) VALUES (s.id, s.v)\nWHEN NOT MATCHED BY SOURCE THEN DELETE;", "BY SOURCE"),
    c("pivot", "SELECT * FROM (SELECT y, q, amt FROM sales) AS s\nPIVOT (SUM(amt) FOR q IN ([1], [2], [3], [4])) AS p;", "PIVOT"),
    c("unpivot", "SELECT y, q, amt FROM pv\nUNPIVOT (amt FOR q IN ([1], [2], [3], [4])) AS u;", "UNPIVOT"),
    c("cross_apply", "SELECT d.name, f.name FROM sys.databases AS d\nCROSS APPLY (SELECT TOP (1) name FROM sys.master_files AS m WHERE m.database_id = d.database_id) AS f;", "CROSS APPLY"),
    c("offset_fetch", "SELECT k FROM kv ORDER BY k OFFSET 10 ROWS FETCH NEXT 5 ROWS ONLY;", "FETCH"),
    c("window_functions", "SELECT k, ROW_NUMBER() OVER (PARTITION BY x ORDER BY k) AS rn,\n  SUM(x) OVER (ORDER BY k ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM kv;", "ROWS BETWEEN"),
    c("select_into_temp", "SELECT k, x INTO #t FROM kv WHERE k < 10;", "#T"),
    c("statements_without_semicolons", "DECLARE @i INT\nSET @i = 1\nSELECT @i\nUPDATE kv SET x = 1 WHERE k = @i", "UPDATE"),
    // In a batch the server sees, GO is a column alias (sqlcmd cuts batches at GO lines).
    c("go_inside_a_batch_is_an_alias", "SELECT 1\nGO\nSELECT 2", "AS GO"),
    c("n_literal", "SELECT N'Grüße', N'it''s';", "GRÜSSE"),
    c("bracketed_identifiers", "SELECT [order].[select] FROM [dbo].[order table] AS [order];", "[ORDER TABLE]"),
    c("at_at_variables", "SELECT @@SPID, @@ROWCOUNT, @@TRANCOUNT, @@VERSION;", "@@TRANCOUNT"),
    c("begin_tran_short", "BEGIN TRAN;\nUPDATE kv SET x = 1 WHERE k = 1;\nCOMMIT TRAN;", "COMMIT"),
    c("save_tran", "BEGIN TRAN;\nSAVE TRAN s1;\nROLLBACK TRAN s1;\nCOMMIT TRAN;", "S1"),
    c("if_else_while", "IF @@TRANCOUNT > 0 BEGIN PRINT 'open' END ELSE PRINT 'none';\nWHILE @i < 10 SET @i = @i + 1;", "WHILE"),
    c("compound_assignment", "SET @i += 1;\nUPDATE kv SET x += 1 WHERE k = 1;", "+="),
    c("raiserror_throw", "RAISERROR (N'%s failed', 16, 1, N'x') WITH NOWAIT;\nTHROW 50001, N'boom', 1;", "50001"),
    c("exec_dynamic", "EXEC sp_executesql N'SELECT @x', N'@x INT', @x = 1;\nEXEC (N'SELECT 1');", "SP_EXECUTESQL"),
    c("convert_style", "SELECT CONVERT(varchar(30), GETDATE(), 121), TRY_CONVERT(int, '1'), IIF(1 = 1, 'a', 'b');", "121"),
    c("set_options", "SET NOCOUNT ON;\nSET XACT_ABORT ON;\nSET TRANSACTION ISOLATION LEVEL SERIALIZABLE;", "SERIALIZABLE"),
    c("create_table_identity", "CREATE TABLE t (id INT IDENTITY(1,1) NOT NULL CONSTRAINT pk_t PRIMARY KEY CLUSTERED,\n  v NVARCHAR(MAX) NULL, c CHAR(8000) NOT NULL DEFAULT 'a');", "CLUSTERED"),
    c("create_index_include", "CREATE NONCLUSTERED INDEX ix ON t (v) INCLUDE (c) WHERE v IS NOT NULL WITH (FILLFACTOR = 80);", "INCLUDE"),
    c("create_database_files", "CREATE DATABASE d ON PRIMARY (NAME = d, FILENAME = 'd.mdf', SIZE = 512MB, FILEGROWTH = 64MB)\nLOG ON (NAME = d_log, FILENAME = 'd.ldf', SIZE = 128MB);", "FILEGROWTH"),
    c("alter_database_add_file", "ALTER DATABASE d ADD FILE (NAME = d2, FILENAME = 'd2.ndf', SIZE = 64MB) TO FILEGROUP fg2;", "FG2"),
    c("dbcc_checkdb", "DBCC CHECKDB (N'd') WITH NO_INFOMSGS, ALL_ERRORMSGS;", "CHECKDB"),
    c("backup_database", "BACKUP DATABASE d TO DISK = N'd.bak' WITH COMPRESSION, INIT;", "COMPRESSION"),
];
