-- Seed 003's JunkData script on a small database: 200 rows of char(8000), each filling a page;
-- identity values 1..200, the DEFAULT evaluated from its stored text, then the table's pages.
CREATE DATABASE J ON (NAME = J, FILENAME = '$(DATA)/J.mdf', SIZE = 4MB)
LOG ON (NAME = J_log, FILENAME = '$(DATA)/J_log.ldf', SIZE = 4MB);
GO
USE J;
CREATE TABLE JunkData (JunkDataID int identity, JunkDataValue char(8000) DEFAULT REPLICATE('Junk', 2000));
GO
SET NOCOUNT ON;
DECLARE @Counter int;
SELECT @Counter = 0;
WHILE @Counter < 200
BEGIN
    INSERT JunkData DEFAULT VALUES;
    SELECT @Counter = @Counter + 1
END
GO
SELECT COUNT(*), MIN(JunkDataID), MAX(JunkDataID), LEN(MAX(JunkDataValue)) FROM JunkData;
SELECT SCOPE_IDENTITY() AS last_identity;
SELECT total_pages, used_pages, data_pages FROM sys.allocation_units;
SELECT rows FROM sys.partitions WHERE object_id = OBJECT_ID('JunkData');
GO
DECLARE @n int, @last int;
SELECT @n = COUNT(*), @last = MAX(JunkDataID) FROM JunkData;
PRINT 'rows: ' + CONVERT(varchar(10), @n) + ', last id: ' + CONVERT(varchar(10), @last);
GO
