-- DBCC PAGE: with trace flag 3604 the lines come to the client; a small table's data page
-- (1:24) at printopt 0-3, the GAM page and the file header page; a page beyond the file and
-- a file that does not exist (Msg 8968); without 3604 the lines go to the ERRORLOG.
-- mask: 0x0000[1-9A-F][0-9A-F]{11}
-- mask: (?m)^0000[1-9A-F][0-9A-F]{11}:
-- mask: m_tornBits = -?\d+ *
-- mask: m_lsn = \(\d+:\d+:\d+\)
CREATE DATABASE PageDemo ON (NAME = PageDemo, FILENAME = '$(DATA)/PageDemo.mdf', SIZE = 4MB)
LOG ON (NAME = PageDemo_log, FILENAME = '$(DATA)/PageDemo_log.ldf', SIZE = 4MB);
GO
USE PageDemo;
CREATE TABLE Fruit (id int, name varchar(20), code char(4) NULL);
INSERT Fruit VALUES (1, 'Apple', 'APL'), (2, NULL, NULL), (3, 'Cherry pie', 'CHR');
GO
DBCC PAGE ('PageDemo', 1, 24, 0);
GO
DBCC TRACEON (3604);
DBCC PAGE ('PageDemo', 1, 24, 0);
DBCC PAGE (0, 1, 24, 1);
DBCC PAGE ('PageDemo', 1, 24, 3);
GO
DBCC PAGE ('PageDemo', 1, 24, 2);
GO
DBCC PAGE ('PageDemo', 1, 2, 0);
DBCC PAGE ('PageDemo', 1, 0);
GO
DBCC PAGE ('PageDemo', 1, 512);
DBCC PAGE ('PageDemo', 9, 1);
DBCC TRACEOFF (3604);
GO
