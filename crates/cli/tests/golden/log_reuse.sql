-- The log wraps: 60 growths each log a GAM page image into a 512 KB log (4 VLFs); checkpoints
-- run as it fills, VLFs are reused with the next FSeqNo and the other parity (128).
CREATE DATABASE W ON (NAME = W, FILENAME = '$(DATA)/W.mdf', SIZE = 1MB)
LOG ON (NAME = W_log, FILENAME = '$(DATA)/W_log.ldf', SIZE = 512KB, FILEGROWTH = 0);
GO
SET NOCOUNT ON;
DECLARE @mb INT = 2;
WHILE @mb <= 61
BEGIN
    EXEC ('ALTER DATABASE W MODIFY FILE (NAME = W, SIZE = ' + CAST(@mb AS VARCHAR(10)) + 'MB)');
    SET @mb = @mb + 1;
END
GO
USE W;
CHECKPOINT;
DBCC LOGINFO WITH NO_INFOMSGS;
SELECT size FROM sys.database_files WHERE name = 'W';
GO
SELECT total_log_size_in_bytes, used_log_space_in_bytes FROM sys.dm_db_log_space_usage;
DBCC SQLPERF (LOGSPACE);
DBCC SQLPERF (WAITSTATS);
GO
