-- Seed 000, Listings 1-2 and Reports 2-3, with Linux paths ($(DATA) is the data root).
SELECT servicename, instant_file_initialization_enabled FROM sys.dm_server_services;
GO
DBCC TRACEON (3004, 3605, -1);
GO
EXEC sp_cycle_errorlog;
GO
-- Report 3: IFI on, only the log file is zeroed.
CREATE DATABASE TestIFI;
GO
EXEC xp_readerrorlog 0, 1, N'Zeroing';
GO
DROP DATABASE TestIFI;
GO
EXEC sp_cycle_errorlog;
GO
-- Report 2: trace flag 1806 turns IFI off; the data file is zeroed too.
DBCC TRACEON (1806, -1);
GO
CREATE DATABASE TestIFI;
GO
EXEC xp_readerrorlog 0, 1, N'Zeroing';
GO
DROP DATABASE TestIFI;
GO
