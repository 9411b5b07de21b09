-- Tables on a heap: CREATE/DROP/TRUNCATE TABLE, INSERT/UPDATE/DELETE, defaults, identity,
-- PRIMARY KEY, aggregates, system views, transactions, and SQL Server's errors for each.
CREATE DATABASE D ON (NAME = D, FILENAME = '$(DATA)/D.mdf', SIZE = 4MB)
LOG ON (NAME = D_log, FILENAME = '$(DATA)/D_log.ldf', SIZE = 2MB);
GO
USE D;
CREATE TABLE dbo.Item (id int IDENTITY(1,1) PRIMARY KEY, name varchar(10) NOT NULL, qty int DEFAULT 5, price decimal(9,2) NULL);
INSERT INTO Item (name, qty, price) VALUES ('apple', 3, 1.25), ('pear', DEFAULT, 2.5);
INSERT Item (name) VALUES ('fig');
SELECT SCOPE_IDENTITY() AS si, @@IDENTITY AS ii, @@ROWCOUNT AS rc;
SELECT * FROM Item ORDER BY id;
SELECT COUNT(*) AS n, SUM(qty) AS s, AVG(qty) AS a, MIN(name) AS mn, MAX(price) AS mx FROM Item;
SELECT qty, COUNT(*) FROM Item GROUP BY qty HAVING COUNT(*) >= 1 ORDER BY qty;
UPDATE Item SET qty = qty + 10 WHERE name = 'fig';
DELETE FROM Item WHERE id = 1;
SELECT id, name, qty FROM Item;
GO
INSERT Item (name) VALUES (NULL);
INSERT Item (id, name) VALUES (9, 'x');
INSERT Item (name) VALUES ('abcdefghijklmnop');
INSERT Item (name, qty) VALUES ('a', 'zz');
GO
SELECT nope FROM Item;
GO
SELECT * FROM Nope;
GO
CREATE TABLE Item (a int);
DROP TABLE Nope;
COMMIT;
ROLLBACK;
SELECT COUNT(*), SUM(qty) FROM Item WHERE 1 = 0;
SELECT name, qty FROM Item GROUP BY name;
GO
CREATE TABLE K (k int CONSTRAINT PK_K PRIMARY KEY, v varchar(5));
INSERT K VALUES (1, 'a'), (2, 'b');
INSERT K VALUES (1, 'c');
UPDATE K SET k = 2 WHERE k = 1;
BEGIN TRAN;
INSERT K VALUES (3, 'c');
SELECT @@TRANCOUNT AS tc, COUNT(*) AS n FROM K;
INSERT K VALUES (4, 'd'), (3, 'dup');
SELECT COUNT(*) AS after_failed FROM K;
ROLLBACK;
SELECT @@TRANCOUNT AS tc, COUNT(*) AS n FROM K;
BEGIN TRANSACTION;
BEGIN TRAN;
DELETE K WHERE k = 2;
COMMIT;
SELECT @@TRANCOUNT AS tc;
COMMIT;
SELECT * FROM K;
SELECT name, type, type_desc FROM sys.tables ORDER BY name;
SELECT name, column_id, system_type_id, max_length, [precision], scale, is_nullable, is_identity FROM sys.columns WHERE object_id = OBJECT_ID('Item');
SELECT index_id, type_desc FROM sys.indexes WHERE object_id = OBJECT_ID('K');
SELECT rows FROM sys.partitions WHERE object_id = OBJECT_ID('K');
SELECT type_desc, total_pages, used_pages, data_pages FROM sys.allocation_units;
TRUNCATE TABLE K;
SELECT COUNT(*) FROM K;
DROP TABLE K;
DROP TABLE IF EXISTS K;
GO
