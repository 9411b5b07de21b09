-- The log under transactions: log_reuse_wait_desc while a transaction holds the log, a log
-- that cannot grow (FILEGROWTH 0) filling up with error 9002 and the transaction still
-- rolling back, then the same log allowed to grow by FILEGROWTH up to MAXSIZE, initialized
-- (trace flags 3004 + 3605 show the zeroing), and RECOVERY SIMPLE / FULL.
-- mask: \(elapsed = N ms\)|took \d+ milliseconds|waited \d+ ms|\d+ bytes\)|in \d+ second\(s\)|\d+ ms, undo \d+ ms
CREATE DATABASE L ON (NAME = L, FILENAME = '$(DATA)/L.mdf', SIZE = 64MB)
LOG ON (NAME = L_log, FILENAME = '$(DATA)/L_log.ldf', SIZE = 4MB, FILEGROWTH = 0);
GO
USE L;
CREATE TABLE T (id int IDENTITY PRIMARY KEY, pad char(4000) NOT NULL DEFAULT 'x');
-- N holds 600 copies of one 4,000-digit pseudo-random string: each row's log record is
-- incompressible (repeats across records do not help the log's per-record compression).
CREATE TABLE N (n int, s char(4000));
SET NOCOUNT ON;
DECLARE @s VARCHAR(4000) = '';
DECLARE @x BIGINT = 777;
WHILE LEN(@s) < 3960
BEGIN
    SET @x = (@x * 1103515245 + 12345) % 2147483648;
    SET @s = @s + CONVERT(VARCHAR(12), @x);
END
DECLARE @i int = 0;
WHILE @i < 600
BEGIN
    INSERT N VALUES (@i, @s);
    SET @i += 1;
END
SET NOCOUNT OFF;
SELECT name, recovery_model_desc, log_reuse_wait_desc FROM sys.databases WHERE name = 'L';
BEGIN TRAN;
INSERT T DEFAULT VALUES;
CHECKPOINT;
SELECT log_reuse_wait_desc FROM sys.databases WHERE name = 'L';
GO
INSERT T (pad) SELECT s FROM N;
GO
SELECT @@TRANCOUNT AS trancount, COUNT(*) AS rows_in_tran FROM T;
ROLLBACK;
SELECT COUNT(*) AS rows_after_rollback FROM T;
CHECKPOINT;
SELECT log_reuse_wait_desc FROM sys.databases WHERE name = 'L';
GO
DBCC TRACEON (3004, 3605, -1);
ALTER DATABASE L MODIFY FILE (NAME = L_log, FILEGROWTH = 1MB, MAXSIZE = 7MB);
GO
BEGIN TRAN;
INSERT T (pad) SELECT s FROM N;
GO
SELECT @@TRANCOUNT AS trancount;
COMMIT;
SELECT COUNT(*) AS rows_committed FROM T;
SELECT name, size, max_size, growth FROM sys.database_files WHERE type = 1;
ALTER DATABASE L SET RECOVERY SIMPLE;
SELECT recovery_model_desc FROM sys.databases WHERE name = 'L';
ALTER DATABASE L SET RECOVERY FULL;
SELECT recovery_model_desc FROM sys.databases WHERE name = 'L';
GO
