-- DBCC CHECKALLOC on a new database and on one that grew over three files while rows
-- were inserted and deleted: no allocation errors; by name, by 0 (the current
-- database) and with NO_INFOMSGS (silent when clean); Msg 2520 for an unknown database.
-- mask: took \d+ milliseconds
CREATE DATABASE A ON PRIMARY (NAME = A, FILENAME = '$(DATA)/A.mdf', SIZE = 3MB, FILEGROWTH = 1MB),
    (NAME = A2, FILENAME = '$(DATA)/A2.ndf', SIZE = 1MB, FILEGROWTH = 1MB),
    (NAME = A3, FILENAME = '$(DATA)/A3.ndf', SIZE = 1MB, FILEGROWTH = 1MB)
LOG ON (NAME = A_log, FILENAME = '$(DATA)/A_log.ldf', SIZE = 8MB, FILEGROWTH = 1MB);
GO
DBCC CHECKALLOC (A);
GO
USE A;
CREATE TABLE dbo.H (id int NOT NULL, pad char(4000) NOT NULL DEFAULT 'heap');
CREATE TABLE dbo.C (id int CONSTRAINT PK_C PRIMARY KEY, pad char(3000) NOT NULL DEFAULT 'tree');
GO
SET NOCOUNT ON;
DECLARE @i int = 0;
WHILE @i < 1500
BEGIN
    INSERT H (id) VALUES (@i);
    INSERT C (id) VALUES (@i);
    SET @i += 1;
END
DELETE C WHERE id % 3 = 0;
SET NOCOUNT OFF;
GO
SELECT file_id, size FROM sys.database_files ORDER BY file_id;
DBCC CHECKALLOC;
DBCC CHECKALLOC (0) WITH NO_INFOMSGS;
DBCC CHECKALLOC (master);
GO
DBCC CHECKALLOC (NoSuchDb);
GO
