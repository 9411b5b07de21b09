-- Seed 004's database, then every file and filegroup operation of ALTER DATABASE.
CREATE DATABASE [Company] ON PRIMARY (
    NAME = N'Company_data',
    FILENAME = N'$(DATA)/Company_data.mdf',
	SIZE = 5MB,
    FILEGROWTH = 1MB)
LOG ON (
    NAME = N'Company_log',
    FILENAME = N'$(DATA)/Company_log.ldf'
);
GO
ALTER DATABASE [Company] ADD FILE (
	NAME = N'SecondFile',
	FILENAME = N'$(DATA)/SecondFile.ndf',
	SIZE = 5MB,
    FILEGROWTH = 1MB);
GO
ALTER DATABASE Company ADD FILEGROUP Archive;
ALTER DATABASE Company ADD FILE (NAME = Arch1, FILENAME = '$(DATA)/Arch1.ndf', SIZE = 1MB, MAXSIZE = 100MB, FILEGROWTH = 10%) TO FILEGROUP Archive;
ALTER DATABASE Company MODIFY FILEGROUP Archive DEFAULT;
ALTER DATABASE Company MODIFY FILEGROUP Archive AUTOGROW_ALL_FILES;
ALTER DATABASE Company ADD LOG FILE (NAME = Company_log2, FILENAME = '$(DATA)/Company_log2.ldf', SIZE = 1MB);
GO
USE Company;
SELECT file_id, type_desc, data_space_id, name, size, max_size, growth, is_percent_growth FROM sys.database_files;
SELECT name, data_space_id, type_desc, is_default, is_autogrow_all_files FROM sys.filegroups;
GO
ALTER DATABASE Company MODIFY FILE (NAME = SecondFile, SIZE = 250MB);
ALTER DATABASE Company MODIFY FILE (NAME = SecondFile, FILEGROWTH = 64MB, MAXSIZE = 1GB, NEWNAME = Second);
SELECT name, size, max_size, growth FROM sys.database_files WHERE name LIKE 'Sec%';
GO
ALTER DATABASE Company REMOVE FILE Arch1;
ALTER DATABASE Company REMOVE FILE Company_log2;
ALTER DATABASE Company MODIFY FILEGROUP [PRIMARY] DEFAULT;
ALTER DATABASE Company REMOVE FILEGROUP Archive;
SELECT name, is_default FROM sys.filegroups;
GO
USE master;
ALTER DATABASE Company MODIFY NAME = Company2;
SELECT name, database_id, state_desc, recovery_model_desc FROM sys.databases ORDER BY database_id;
SELECT DB_ID('Company2') AS id, DB_NAME(5) AS name, DATABASEPROPERTYEX('Company2', 'Version') AS version,
       DATABASEPROPERTYEX(N'Company2', N'Recovery') AS recovery;
ALTER DATABASE Company2 SET RECOVERY SIMPLE;
SELECT DATABASEPROPERTYEX('Company2', 'Recovery') AS recovery;
IF DATABASEPROPERTYEX (N'Company2', N'Version') > 0
BEGIN
	ALTER DATABASE [Company2] SET SINGLE_USER
		WITH ROLLBACK IMMEDIATE;
	PRINT 'Company2 exists';
END
GO
USE Company2;
SELECT FILE_ID('Company_log') AS log_id, FILE_NAME(1) AS primary_name, DB_NAME() AS current_db;
USE master;
DROP DATABASE Company2;
SELECT name FROM sys.master_files WHERE database_id > 4;
IF DATABASEPROPERTYEX (N'Company2', N'Version') > 0 PRINT 'still there' ELSE PRINT 'gone';
GO
DBCC TRACEON (3604);
DBCC TRACEON (1806, -1);
DBCC TRACESTATUS;
DBCC TRACEOFF (1806, -1);
DBCC TRACESTATUS (-1);
GO
