-- Seed 003's lab, first step, as the article writes it: populate a large chunk of pages with
-- contrived "junk" data. (The database TestWithZeroInitialization is created first.)
USE TestWithZeroInitialization
go
CREATE TABLE JunkData
(
JunkDataID int identity,
JunkDataValue char(8000)
DEFAULT REPLICATE('Junk', 2000)
)
go
SET NOCOUNT ON
go
DECLARE @Counter int
SELECT @Counter = 0
WHILE @Counter < 20000
BEGIN
INSERT JunkData DEFAULT VALUES
SELECT @Counter = @Counter + 1
END
go
