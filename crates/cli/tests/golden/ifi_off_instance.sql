-- setup: --instant-file-init off
-- An instance set up with IFI off zeroes data files on create and grow.
DBCC TRACEON (3004, 3605, -1);
SELECT instant_file_initialization_enabled FROM sys.dm_server_services;
CREATE DATABASE Z ON (NAME = Z, FILENAME = '$(DATA)/Z.mdf', SIZE = 2MB)
LOG ON (NAME = Z_log, FILENAME = '$(DATA)/Z_log.ldf', SIZE = 1MB);
ALTER DATABASE Z MODIFY FILE (NAME = Z, SIZE = 3MB);
ALTER DATABASE Z ADD FILE (NAME = Z2, FILENAME = '$(DATA)/Z2.ndf', SIZE = 1MB);
DROP DATABASE Z;
GO
