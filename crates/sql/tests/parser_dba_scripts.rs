//! Statements typical of DBA and demo scripts (SQLskills-style) parse.

use extentdb_sql::parser::parse_batch;
use extentdb_sql::script::split_batches;

const SCRIPT: &str = r#"
USE master;
GO
IF DB_ID (N'DemoDB') IS NOT NULL
    DROP DATABASE DemoDB;
GO
CREATE DATABASE DemoDB;
GO
ALTER DATABASE DemoDB SET RECOVERY SIMPLE;
ALTER DATABASE DemoDB SET AUTO_CREATE_STATISTICS OFF, ALLOW_SNAPSHOT_ISOLATION ON;
ALTER DATABASE DemoDB SET TARGET_RECOVERY_TIME = 60 SECONDS;
ALTER DATABASE DemoDB SET QUERY_STORE = ON (OPERATION_MODE = READ_WRITE);
GO
SELECT [name], [physical_name], [size] * 8 / 1024 AS [SizeMB], [growth], [is_percent_growth]
FROM sys.master_files
WHERE [database_id] = DB_ID (N'DemoDB');
GO
SELECT COUNT (*) FROM fn_dblog (NULL, NULL);
SELECT [Current LSN], [Operation], [Context] FROM fn_dblog (NULL, NULL) WHERE [Operation] LIKE '%CKPT%';
GO
DBCC SQLPERF (LOGSPACE);
DBCC LOGINFO (N'DemoDB');
DBCC IND (N'DemoDB', N'T1', -1);
DBCC TRACEON (3604);
DBCC PAGE (N'DemoDB', 1, 9, 3) WITH TABLERESULTS;
DBCC CHECKDB (N'DemoDB') WITH NO_INFOMSGS, ALL_ERRORMSGS;
DBCC SHRINKFILE (N'DemoDB_log', 1);
DBCC DROPCLEANBUFFERS;
GO
SELECT * FROM sys.dm_db_index_physical_stats (DB_ID (N'DemoDB'), OBJECT_ID (N'T1'), NULL, NULL, 'DETAILED');
SELECT [log_reuse_wait_desc] FROM sys.databases WHERE [name] = N'DemoDB';
SELECT DATABASEPROPERTYEX (N'DemoDB', N'Recovery') AS [Recovery];
SELECT @@VERSION, @@SPID, SERVERPROPERTY ('ProductVersion');
GO
SET STATISTICS IO, TIME ON;
DECLARE @i INT = 0, @msg NVARCHAR (200);
WHILE (@i < 10)
BEGIN
    SET @i += 1;
    IF @i % 2 = 0 CONTINUE;
    SELECT @msg = N'Iteration ' + CAST (@i AS NVARCHAR (10));
    RAISERROR (@msg, 0, 1) WITH NOWAIT;
END;
GO
BEGIN TRAN;
UPDATE T1 SET c2 = REPLICATE ('b', 100) WHERE c1 BETWEEN 1 AND 100;
DELETE FROM T1 WHERE c1 > 900;
ROLLBACK TRAN;
CHECKPOINT;
GO
BACKUP DATABASE [DemoDB] TO DISK = N'C:\SQLskills\DemoDB.bck' WITH INIT, STATS;
BACKUP LOG [DemoDB] TO DISK = N'C:\SQLskills\DemoDB_Log.bck' WITH INIT, NO_TRUNCATE;
RESTORE DATABASE [DemoDB] FROM DISK = N'C:\SQLskills\DemoDB.bck' WITH REPLACE, NORECOVERY;
RESTORE LOG [DemoDB] FROM DISK = N'C:\SQLskills\DemoDB_Log.bck' WITH RECOVERY;
RESTORE HEADERONLY FROM DISK = N'C:\SQLskills\DemoDB.bck';
GO
SELECT TOP 10 o.name, SUM (p.rows) AS rows
FROM sys.objects o
JOIN sys.partitions p ON p.object_id = o.object_id
WHERE o.type = 'U' AND p.index_id IN (0, 1)
GROUP BY o.name
ORDER BY SUM (p.rows) DESC;
GO
EXEC sp_configure 'show advanced options', 1;
RECONFIGURE;
EXEC sp_configure 'max server memory (MB)', 4096;
RECONFIGURE WITH OVERRIDE;
GO
SELECT CASE WHEN [is_percent_growth] = 1 THEN CAST ([growth] AS VARCHAR) + '%'
            ELSE CAST ([growth] * 8 / 1024 AS VARCHAR) + 'MB' END AS [Growth]
FROM sys.database_files;
SELECT CONVERT (VARCHAR (23), GETDATE (), 121), DATEADD (dd, -1, GETDATE ());
GO
"#;

#[test]
fn dba_script_parses() {
    for batch in split_batches(SCRIPT) {
        if let Err(e) = parse_batch(&batch.text) {
            panic!(
                "batch at script line {}: {e} (script line {})\n{}",
                batch.first_line,
                batch.first_line + e.line - 1,
                batch.text
            );
        }
    }
}
