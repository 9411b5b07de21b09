-- mask: (?m)^ *\d+ *$
-- Seed 001's script, paths changed; the millisecond figures vary and are masked.
DBCC TRACEON (3605, 3004);
DECLARE @start_time DATETIME2 = SYSDATETIME();
CREATE DATABASE IFI_Enabled
ON  ( NAME = N'IFI_Enabled', FILENAME = N'$(DATA)/IFI_Enabled.mdf', SIZE = 512MB );
SELECT DATEDIFF(MILLISECOND, @start_time, SYSDATETIME()) AS 'ms to create database with INI'
GO
DROP DATABASE IFI_Enabled;
GO
-- Enable trace flag 1806 to disable IFI for this session only
DBCC TRACEON (1806);
GO
DECLARE @start_time DATETIME2 = SYSDATETIME();
CREATE DATABASE IFI_Disabled
ON  ( NAME = N'IFI_Disabled', FILENAME = N'$(DATA)/IFI_Disabled.mdf', SIZE = 512MB );
SELECT DATEDIFF(MILLISECOND, @start_time, SYSDATETIME()) AS 'ms to create database without INI'
GO
DROP DATABASE IFI_Disabled;
GO
