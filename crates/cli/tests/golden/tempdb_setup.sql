-- setup: --tempdb-files 8 --tempdb-file-size 1GB
-- Seed 002: setup caps tempdb files at 1,024 MB and 8 files; extentdb has no such caps, and
-- with IFI the files cost nothing to create at every start.
SELECT file_id, name, type_desc, size, growth FROM sys.master_files WHERE database_id = DB_ID('tempdb') ORDER BY file_id;
GO
