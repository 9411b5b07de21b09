-- DBCC CHECKDB, CHECKTABLE, CHECKCATALOG and DBINFO on a healthy database that grew over
-- two files while rows were inserted into a heap and a clustered index and some deleted:
-- SQL Server's lines per table and the closing line; PHYSICAL_ONLY and MAXDOP; the last
-- good check in DATABASEPROPERTYEX and DBINFO; TABLERESULTS; bad input (2501, 2520,
-- 7919, 2526). Also a DECLARE inside a WHILE loop, which runs again without error (134 is
-- for a second DECLARE of the name).
-- mask: took \d+ milliseconds
-- mask: dbi_familyGUID = [0-9a-f]+
CREATE DATABASE K ON PRIMARY (NAME = K, FILENAME = '$(DATA)/K.mdf', SIZE = 3MB, FILEGROWTH = 1MB),
    (NAME = K2, FILENAME = '$(DATA)/K2.ndf', SIZE = 1MB, FILEGROWTH = 1MB)
LOG ON (NAME = K_log, FILENAME = '$(DATA)/K_log.ldf', SIZE = 8MB, FILEGROWTH = 1MB);
GO
USE K;
CREATE TABLE dbo.H (id int NOT NULL, flag bit, at datetime, pad char(3000) NOT NULL DEFAULT 'heap');
CREATE TABLE dbo.C (id int CONSTRAINT PK_C PRIMARY KEY, amount decimal(9, 2), pad varchar(3000));
GO
SET NOCOUNT ON;
DECLARE @i int = 0;
WHILE @i < 1200
BEGIN
    DECLARE @k int = (@i * 7919) % 10007;
    INSERT H (id, flag, at) VALUES (@i, @i % 2, DATEADD(day, @i, '2020-01-01'));
    INSERT C (id, amount, pad) VALUES (@k, @i / 7.0, REPLICATE('c', 100 + @i % 2000));
    SET @i += 1;
END
DELETE C WHERE id % 5 = 0;
SET NOCOUNT OFF;
GO
SELECT DATABASEPROPERTYEX('K', 'LastGoodCheckDbTime') AS never_checked;
DBCC CHECKDB;
SELECT CASE WHEN DATABASEPROPERTYEX('K', 'LastGoodCheckDbTime') > '2000-01-01' THEN 'recorded' ELSE 'missing' END AS last_good;
DBCC CHECKDB (K) WITH PHYSICAL_ONLY, MAXDOP = 1;
DBCC CHECKDB (0, NOINDEX) WITH NO_INFOMSGS, MAXDOP = 2;
DBCC CHECKTABLE ('dbo.C');
DBCC CHECKTABLE (H) WITH NO_INFOMSGS;
DBCC CHECKCATALOG (K);
DBCC CHECKDB (master) WITH NO_INFOMSGS;
GO
DBCC CHECKDB WITH TABLERESULTS, NO_INFOMSGS;
GO
DBCC TRACEON (3604);
DBCC DBINFO (K);
DBCC TRACEOFF (3604);
GO
DBCC CHECKTABLE ('NoSuchTable');
GO
DBCC CHECKDB (NoSuchDb);
GO
DBCC CHECKDB (K, REPAIR_ALLOW_DATA_LOSS);
GO
DBCC CHECKDB (K) WITH NO_SUCH_OPTION;
GO
