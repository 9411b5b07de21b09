//! The seed scripts must split into the expected batches and every batch must parse.

use extentdb_sql::ast::*;
use extentdb_sql::parser::parse_batch;
use extentdb_sql::script::split_batches;

const SEED: &str = r#"DBCC TRACEON (3605, 3004);
DECLARE @start_time DATETIME2 = SYSDATETIME();
CREATE DATABASE IFI_Enabled
ON  ( NAME = N'IFI_Enabled', FILENAME = N'C:\SQL_2016\Data\IFI_Enabled.mdf', SIZE = 512MB );
SELECT DATEDIFF(MILLISECOND, @start_time, SYSDATETIME()) AS 'ms to create database with INI'
GO
DROP DATABASE IFI_Enabled;
GO
DBCC TRACEON (1806);
GO
SELECT servicename, service_account, instant_file_initialization_enabled FROM sys.dm_server_services;
GO
DBCC TRACEON (1165, 3605);
GO
EXEC sp_cycle_errorlog;
GO
USE [master];
GO
IF DATABASEPROPERTYEX (N'Company', N'Version') > 0
BEGIN
	ALTER DATABASE [Company] SET SINGLE_USER
		WITH ROLLBACK IMMEDIATE;
	DROP DATABASE [Company];
END
GO
CREATE DATABASE [Company] ON PRIMARY (
    NAME = N'Company_data',
    FILENAME = N'D:\SQLskills\Company_data.mdf',
	SIZE = 5MB,
    FILEGROWTH = 1MB)
LOG ON (
    NAME = N'Company_log',
    FILENAME = N'D:\SQLskills\Company_log.ldf'
);
EXEC xp_readerrorlog;
GO
ALTER DATABASE [Company] ADD FILE (
	NAME = N'SecondFile',
	FILENAME = N'D:\SQLskills\SecondFile.ndf',
	SIZE = 5MB,
    FILEGROWTH = 1MB);
GO
USE [Company];
GO
CREATE TABLE [BigRows] (
	[c1] INT IDENTITY,
	[c2] CHAR (8000) DEFAULT 'a');
GO
SET NOCOUNT ON;
GO
INSERT INTO [BigRows] DEFAULT VALUES;
GO 70000
CREATE TABLE JunkData
(
JunkDataID int identity,
JunkDataValue char(8000)
DEFAULT REPLICATE('Junk', 2000)
)
go
DECLARE @Counter int
SELECT @Counter = 0
WHILE @Counter < 20000
BEGIN
INSERT JunkData DEFAULT VALUES
SELECT @Counter = @Counter + 1
END
go
DBCC PAGE ('TestSecurityExposure', 1, 200, 2)
SELECT * FROM sys.database_files WHERE type_desc = 'ROWS' AND name LIKE 'Comp%' OR size <> 640
"#;

fn parse_all() -> Vec<(u32, u32, Vec<Statement>)> {
    split_batches(SEED)
        .into_iter()
        .map(|b| {
            let statements = parse_batch(&b.text).unwrap_or_else(|e| {
                panic!("batch at line {} failed: {e}\n{}", b.first_line, b.text)
            });
            (b.first_line, b.repeat, statements)
        })
        .collect()
}

#[test]
fn seed_script_splits_and_parses() {
    let batches = parse_all();
    assert_eq!(batches.len(), 17);
    let counts: Vec<usize> = batches.iter().map(|b| b.2.len()).collect();
    assert_eq!(counts, [4, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 3, 2]);
    let insert = batches
        .iter()
        .find(|b| b.1 == 70000)
        .expect("the GO 70000 batch");
    assert!(matches!(
        &insert.2[0].kind,
        StatementKind::Insert(Insert {
            source: InsertSource::DefaultValues,
            ..
        })
    ));
}

#[test]
fn seed_script_first_batch_details() {
    let batches = parse_all();
    let (first_line, repeat, statements) = &batches[0];
    assert_eq!((*first_line, *repeat), (1, 1));
    assert_eq!(statements[0].line, 1);
    match &statements[0].kind {
        StatementKind::Dbcc(d) => {
            assert_eq!(d.name, "TRACEON");
            assert_eq!(d.args.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    match &statements[2].kind {
        StatementKind::CreateDatabase(db) => {
            assert_eq!(db.name, "IFI_Enabled");
            let f = &db.primary_files[0];
            assert_eq!(f.name.as_deref(), Some("IFI_Enabled"));
            assert_eq!(
                f.filename.as_deref(),
                Some(r"C:\SQL_2016\Data\IFI_Enabled.mdf")
            );
            assert_eq!(f.size, Some(Size::Bytes(512 << 20)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(statements[3].line, 5);
    match &statements[3].kind {
        StatementKind::Select(q) => {
            let QueryBody::Select(s) = &q.body else {
                panic!()
            };
            let SelectItem::Expr { expr, alias } = &s.items[0] else {
                panic!()
            };
            assert_eq!(alias.as_deref(), Some("ms to create database with INI"));
            let Expr::Function { name, args, .. } = expr else {
                panic!()
            };
            assert_eq!(name.name(), "DATEDIFF");
            assert_eq!(args[0], Expr::DatePart("MILLISECOND".into()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn seed_script_company_database() {
    let batches = parse_all();
    let (_, _, statements) = batches
        .iter()
        .find(|b| matches!(&b.2[0].kind, StatementKind::CreateDatabase(db) if db.name == "Company"))
        .expect("CREATE DATABASE [Company]");
    let StatementKind::CreateDatabase(db) = &statements[0].kind else {
        unreachable!()
    };
    assert_eq!(db.primary_files[0].file_growth, Some(Size::Bytes(1 << 20)));
    assert_eq!(db.log_files[0].name.as_deref(), Some("Company_log"));
    assert!(matches!(
        &statements[1].kind,
        StatementKind::Execute(Execute {
            target: ExecTarget::Procedure { .. },
            ..
        })
    ));
}

#[test]
fn seed_script_if_block_and_while() {
    let batches = parse_all();
    let if_batch = batches
        .iter()
        .find(|b| matches!(b.2[0].kind, StatementKind::If { .. }))
        .expect("IF batch");
    let StatementKind::If { then_branch, .. } = &if_batch.2[0].kind else {
        unreachable!()
    };
    let StatementKind::Block(body) = &then_branch.kind else {
        panic!()
    };
    assert_eq!(body.len(), 2);
    assert_eq!(body[0].line, 3);
    assert!(matches!(
        &body[0].kind,
        StatementKind::AlterDatabase {
            action: AlterDatabaseAction::Set {
                termination: Some(Termination::RollbackImmediate),
                ..
            },
            ..
        }
    ));
    let while_batch = batches
        .iter()
        .find(|b| {
            b.2.iter()
                .any(|s| matches!(s.kind, StatementKind::While { .. }))
        })
        .expect("WHILE batch");
    assert_eq!(while_batch.2.len(), 3);
    let last = batches.last().unwrap();
    assert_eq!(last.2.len(), 2);
}
