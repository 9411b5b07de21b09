-- Seed 000, Listings 1-3 and Reports 2-3 (paths for Linux; files go to the default data root).
SELECT servicename, service_account, instant_file_initialization_enabled
FROM sys.dm_server_services;
GO
DBCC TRACEON (3004, 3605, -1);
GO
EXEC sp_cycle_errorlog;
GO
-- Report 3: with IFI on, only the log file is zeroed.
CREATE DATABASE TestIFI;
GO
EXEC xp_readerrorlog;
GO
DROP DATABASE TestIFI;
GO
EXEC sp_cycle_errorlog;
GO
-- Report 2: with trace flag 1806 IFI is off and the data file is zeroed too.
DBCC TRACEON (1806, -1);
GO
CREATE DATABASE TestIFI;
GO
EXEC xp_readerrorlog;
GO
DROP DATABASE TestIFI;
GO
DBCC TRACEOFF (1806, -1);
GO
