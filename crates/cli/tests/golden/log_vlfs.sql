-- VLFs per SQL Server 2022: a new 8 MB log gets 4; a growth of 64 MB or less, or below 1/8 of
-- the log, gets 1; a 100 MB growth of a 9 MB log gets 8; a new 100 MB log file gets 8.
CREATE DATABASE L ON (NAME = L, FILENAME = '$(DATA)/L.mdf') LOG ON (NAME = L_log, FILENAME = '$(DATA)/L_log.ldf', SIZE = 8MB);
GO
DBCC LOGINFO (L);
GO
ALTER DATABASE L MODIFY FILE (NAME = L_log, SIZE = 9MB);
ALTER DATABASE L MODIFY FILE (NAME = L_log, SIZE = 109MB);
ALTER DATABASE L ADD LOG FILE (NAME = L_log2, FILENAME = '$(DATA)/L_log2.ldf', SIZE = 100MB);
GO
USE L;
DBCC LOGINFO WITH NO_INFOMSGS;
GO
