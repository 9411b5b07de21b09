-- Space reporting on a database with two data files in PRIMARY, a heap and a clustered
-- table: FILEPROPERTY, sys.dm_db_file_space_usage, DBCC SHOWFILESTATS, sp_spaceused,
-- sp_helpfile and sp_helpdb, the checks that their figures agree, and their errors.
-- mask: [A-Z][a-z]{2} [ \d]\d \d{4}
CREATE DATABASE S ON PRIMARY (NAME = S, FILENAME = '$(DATA)/S.mdf', SIZE = 8MB),
    (NAME = S2, FILENAME = '$(DATA)/S2.ndf', SIZE = 4MB, MAXSIZE = 64MB, FILEGROWTH = 10%)
LOG ON (NAME = S_log, FILENAME = '$(DATA)/S_log.ldf', SIZE = 8MB, FILEGROWTH = 1MB);
GO
USE S;
CREATE TABLE dbo.H (id int NOT NULL, pad char(2000) NOT NULL DEFAULT 'heap');
CREATE TABLE dbo.C (id int CONSTRAINT PK_C PRIMARY KEY, pad char(1000) NOT NULL DEFAULT 'tree');
GO
-- An empty database: the fixed extents (file header, PFS, GAM ...; two in file 1, one in
-- file 3) and the catalog's extent are allocated, the clustered table's root page too.
SELECT file_id, total_page_count, allocated_extent_page_count, unallocated_extent_page_count,
    user_object_reserved_page_count FROM sys.dm_db_file_space_usage;
EXEC sp_spaceused;
GO
SET NOCOUNT ON;
DECLARE @i int = 0;
WHILE @i < 300
BEGIN
    INSERT H (id) VALUES (@i);
    INSERT C (id) VALUES (@i);
    SET @i += 1;
END
DELETE H WHERE id >= 296;
SET NOCOUNT OFF;
GO
-- 1. FILEPROPERTY: pages used (data: allocated extents * 8; log: log in use), the file's
-- kind; NULL for an unknown file or property.
SELECT name, FILEPROPERTY(name, 'SpaceUsed') AS space_used,
    FILEPROPERTY(name, 'IsPrimaryFile') AS is_primary, FILEPROPERTY(name, 'IsLogFile') AS is_log,
    FILEPROPERTY(name, 'isreadonly') AS is_read_only FROM sys.database_files;
SELECT FILEPROPERTY('nope', 'SpaceUsed') AS unknown_file, FILEPROPERTY('S', 'Nope') AS unknown_property,
    FILEPROPERTY(NULL, 'SpaceUsed') AS null_file;
SELECT CEILING(used_log_space_in_bytes / 8192.0) AS log_pages_in_use FROM sys.dm_db_log_space_usage;
-- 2. sys.dm_db_file_space_usage, one row per data file.
SELECT * FROM sys.dm_db_file_space_usage;
-- 3. DBCC SHOWFILESTATS: UsedExtents = allocated_extent_page_count / 8.
SELECT file_id, allocated_extent_page_count / 8 AS used_extents FROM sys.dm_db_file_space_usage;
DBCC SHOWFILESTATS;
GO
-- Checks: SpaceUsed of the data files = allocated extent pages; the extents user tables
-- own (user_object_reserved_page_count) = the tables' total_pages; the rest of the
-- allocated pages are the fixed extents (24 pages) and the catalog's extent (8 pages).
DECLARE @space_used bigint, @allocated bigint, @user bigint, @tables bigint;
SELECT @space_used = SUM(CAST(FILEPROPERTY(name, 'SpaceUsed') AS bigint)) FROM sys.database_files WHERE type = 0;
SELECT @allocated = SUM(allocated_extent_page_count), @user = SUM(user_object_reserved_page_count)
    FROM sys.dm_db_file_space_usage;
SELECT @tables = SUM(total_pages) FROM sys.allocation_units;
SELECT CASE WHEN @space_used = @allocated THEN 'ok' ELSE 'MISMATCH' END AS space_used_is_allocated,
    CASE WHEN @user = @tables THEN 'ok' ELSE 'MISMATCH' END AS user_objects_are_tables,
    @allocated - @user AS fixed_and_catalog_pages, @tables * 8 AS tables_reserved_kb;
GO
-- 4. sp_spaceused: per table (reserved = its extents, data = heap pages or leaves,
-- index_size = non-leaf and IAM pages, unused = the rest), then the database: reserved =
-- the tables' reserved + the catalog's extent (64 KB); data and index_size are the tables'
-- plus the catalog's pages (counted as data).
EXEC sp_spaceused N'dbo.H';
EXEC sp_spaceused 'C';
EXEC sp_spaceused @objname = N'[dbo].[C]';
SELECT object_id, rows FROM sys.partitions ORDER BY object_id;
SELECT total_pages, used_pages, data_pages FROM sys.allocation_units;
EXEC sp_spaceused;
EXEC sp_spaceused @oneresultset = 1;
GO
-- 5. sp_helpfile and sp_helpdb.
EXEC sp_helpfile;
EXEC sp_helpdb;
EXEC sp_helpdb S;
EXEC sp_helpdb @dbname = N'master';
GO
-- Bad input: SQL Server's messages.
EXEC sp_spaceused 'Nope';
EXEC sp_spaceused N'master.dbo.H';
EXEC sp_helpdb 'Nope';
EXEC sp_helpdb 'S', 1;
EXEC sp_spaceused @table = 'H';
DBCC SHOWFILESTATS (1);
GO
