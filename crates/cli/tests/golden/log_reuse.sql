-- The log wraps: 200 rows of 4,000 pseudo-random digits (a linear congruential sequence:
-- the log cannot compress them, and every run writes the same bytes) go through a 512 KB log (4 VLFs) in autocommit transactions; checkpoints run as it
-- fills, and VLFs are reused with the next FSeqNo and the other parity (128).
CREATE DATABASE W ON (NAME = W, FILENAME = '$(DATA)/W.mdf', SIZE = 4MB)
LOG ON (NAME = W_log, FILENAME = '$(DATA)/W_log.ldf', SIZE = 512KB, FILEGROWTH = 0);
GO
USE W;
CREATE TABLE R (id int IDENTITY PRIMARY KEY, v char(4000) NOT NULL);
SET NOCOUNT ON;
DECLARE @n INT = 0;
DECLARE @s VARCHAR(4000);
DECLARE @x BIGINT = 12345;
WHILE @n < 200
BEGIN
    SET @s = '';
    WHILE LEN(@s) < 3960
    BEGIN
        SET @x = (@x * 1103515245 + 12345) % 2147483648;
        SET @s = @s + CONVERT(VARCHAR(12), @x);
    END
    INSERT R (v) VALUES (@s);
    SET @n = @n + 1;
END
GO
USE W;
CHECKPOINT;
DBCC LOGINFO WITH NO_INFOMSGS;
SELECT COUNT(*) AS rows_left, MIN(id) AS first_id, MAX(id) AS last_id FROM R;
GO
SELECT total_log_size_in_bytes, used_log_space_in_bytes FROM sys.dm_db_log_space_usage;
DBCC SQLPERF (LOGSPACE);
DBCC SQLPERF (WAITSTATS);
GO
