-- Seed 004 (proportional fill), the article's script unchanged but for the file paths: relative
-- FILENAMEs land in the instance's first data root.
DBCC TRACEON (1165, 3605);
GO
EXEC sp_cycle_errorlog;
GO
USE [master];
GO
IF DATABASEPROPERTYEX (N'Company', N'Version') > 0
BEGIN
	ALTER DATABASE [Company] SET SINGLE_USER
		WITH ROLLBACK IMMEDIATE;
	DROP DATABASE [Company];
END
GO
CREATE DATABASE [Company] ON PRIMARY (
    NAME = N'Company_data',
    FILENAME = N'Company_data.mdf',
	SIZE = 5MB,
    FILEGROWTH = 1MB)
LOG ON (
    NAME = N'Company_log',
    FILENAME = N'Company_log.ldf'
);
EXEC xp_readerrorlog;
GO
ALTER DATABASE [Company] ADD FILE (
	NAME = N'SecondFile',
	FILENAME = N'SecondFile.ndf',
	SIZE = 5MB,
    FILEGROWTH = 1MB);
GO
EXEC xp_readerrorlog;
GO
ALTER DATABASE [Company] ADD FILE (
	NAME = N'ThirdFile',
	FILENAME = N'ThirdFile.ndf',
	SIZE = 250MB,
    FILEGROWTH = 1MB);
GO
EXEC xp_readerrorlog;
GO
USE [Company];
GO
CREATE TABLE [BigRows] (
	[c1] INT IDENTITY,
	[c2] CHAR (8000) DEFAULT 'a');
GO
SET NOCOUNT ON;
GO
INSERT INTO [BigRows] DEFAULT VALUES;
GO 70000
EXEC xp_readerrorlog;
GO
