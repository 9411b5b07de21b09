-- SET IMPLICIT_TRANSACTIONS ON (mssql-jdbc's setAutoCommit(false)): with @@TRANCOUNT 0, a
-- SELECT from a table, INSERT, UPDATE, DELETE or BEGIN TRAN begins a transaction first; a
-- SELECT without FROM does not. ROLLBACK undoes the rows; OFF returns to autocommit.
CREATE DATABASE I ON (NAME = I, FILENAME = '$(DATA)/I.mdf', SIZE = 4MB)
LOG ON (NAME = I_log, FILENAME = '$(DATA)/I_log.ldf', SIZE = 2MB);
GO
USE I;
CREATE TABLE T (id INT PRIMARY KEY);
GO
SET IMPLICIT_TRANSACTIONS ON;
SELECT @@TRANCOUNT AS after_set;
INSERT INTO T VALUES (1);
SELECT @@TRANCOUNT AS after_insert;
ROLLBACK;
SELECT COUNT(*) AS rows_after_rollback, @@TRANCOUNT AS after_select_from_table FROM T;
COMMIT;
INSERT INTO T VALUES (2);
COMMIT;
BEGIN TRAN;
SELECT @@TRANCOUNT AS begin_tran_in_implicit_mode;
COMMIT;
COMMIT;
UPDATE T SET id = 3 WHERE id = 2;
DELETE FROM T WHERE id = 99;
SELECT @@TRANCOUNT AS after_update_delete;
ROLLBACK;
SET IMPLICIT_TRANSACTIONS OFF;
INSERT INTO T VALUES (4);
SELECT @@TRANCOUNT AS autocommit_again;
SELECT id FROM T ORDER BY id;
GO
