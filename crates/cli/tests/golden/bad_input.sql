-- touch: stray.mdf
-- Each statement is refused with SQL Server's message and leaves files and catalog as they were.
CREATE DATABASE Bad1 ON (NAME = Bad1, FILENAME = '/etc/extentdb_bad1.mdf');
GO
CREATE DATABASE Bad1b ON (NAME = Bad1b, FILENAME = '$(DATA)/../escape.mdf');
GO
CREATE DATABASE Bad2 ON (NAME = Bad2, FILENAME = '$(DATA)/nodir/Bad2.mdf');
GO
CREATE DATABASE Bad3 ON (NAME = Bad3, FILENAME = '$(DATA)/stray.mdf');
GO
CREATE DATABASE Good ON (NAME = Good_data, FILENAME = '$(DATA)/Good.mdf', SIZE = 5MB)
LOG ON (NAME = Good_log, FILENAME = '$(DATA)/Good_log.ldf', SIZE = 1MB);
GO
CREATE DATABASE good;
GO
CREATE DATABASE Bad4 ON (NAME = Bad4, FILENAME = '$(DATA)/Good.mdf');
GO
CREATE DATABASE Bad5 ON (NAME = Bad5, FILENAME = '$(DATA)/Bad5.mdf', SIZE = 10MB, MAXSIZE = 5MB);
GO
CREATE DATABASE Bad6 ON (NAME = Same, FILENAME = '$(DATA)/Bad6a.mdf'), (NAME = same, FILENAME = '$(DATA)/Bad6b.ndf');
GO
CREATE DATABASE Bad7 ON (NAME = Bad7, FILENAME = '$(DATA)/Bad7.mdf', SIZE = 256KB);
GO
CREATE DATABASE Bad8 ON (NAME = Bad8, FILENAME = '$(DATA)/Bad8.mdf', SIZE = 10%);
GO
ALTER DATABASE Good MODIFY FILE (NAME = Good_data, SIZE = 4MB);
GO
ALTER DATABASE Good MODIFY FILE (NAME = Good_data, MAXSIZE = 10MB);
ALTER DATABASE Good MODIFY FILE (NAME = Good_data, SIZE = 20MB);
GO
ALTER DATABASE Good REMOVE FILE Good_data;
GO
ALTER DATABASE Good REMOVE FILE Good_log;
GO
ALTER DATABASE Good MODIFY FILE (NAME = Nope, SIZE = 20MB);
GO
ALTER DATABASE Good ADD FILE (NAME = Good_log, FILENAME = '$(DATA)/x.ndf');
GO
ALTER DATABASE Good ADD FILE (NAME = x, FILENAME = '$(DATA)/model.mdf');
GO
ALTER DATABASE Good ADD FILE (NAME = y, FILENAME = '$(DATA)/y.ndf') TO FILEGROUP Nope;
GO
ALTER DATABASE Good ADD FILEGROUP [PRIMARY];
GO
ALTER DATABASE Nope ADD FILE (NAME = x, FILENAME = '$(DATA)/x.ndf');
GO
DROP DATABASE Nope;
GO
DROP DATABASE master;
GO
USE Nope;
GO
SELECT * FROM sys.nonexistent;
PRINT 'not reached: 208 ends the batch';
GO
SELECT name, size, max_size FROM sys.master_files WHERE database_id = DB_ID('Good') ORDER BY file_id;
SELECT name FROM sys.databases ORDER BY database_id;
GO
SELEC 1;
GO
SELECT 'abc;
GO
