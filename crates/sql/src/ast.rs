//! The T-SQL syntax tree: what the parser produces and the executor matches on.
//!
//! Names follow SQL Server's vocabulary (filespec, filegroup, termination, DBCC). Nodes
//! are enums with named fields so an executor can destructure them directly. Identifiers
//! are stored unquoted (`[Company]` becomes `Company`); keywords-as-values (option names,
//! date parts) keep the user's spelling unless documented as upper-cased.
//!
//! The tree deliberately holds syntax only: no name resolution, no type checking, no
//! defaults that depend on context (for example a `VARCHAR` without length is 1 in a
//! declaration but 30 in `CAST`; [`DataType::length_given`] lets the executor decide).

use crate::types::SqlType;

/// One statement with the 1-based, batch-relative line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub line: u32,
    pub kind: StatementKind,
    /// Its text in the batch: characters `span.0..span.1` (SHOWPLAN_TEXT's StmtText).
    pub span: (usize, usize),
}

/// Every statement form the parser understands.
#[derive(Debug, Clone, PartialEq)]
pub enum StatementKind {
    CreateDatabase(CreateDatabase),
    AlterDatabase {
        name: String,
        action: AlterDatabaseAction,
    },
    DropDatabase {
        if_exists: bool,
        names: Vec<String>,
    },
    Use {
        database: String,
    },
    Dbcc(Dbcc),
    Execute(Execute),
    Select(Box<Query>),
    Declare(Vec<Declaration>),
    /// `SET @v = expr`, `SET @v += expr`, ...
    SetVariable {
        name: String,
        op: AssignOp,
        value: Expr,
    },
    /// `SET NOCOUNT ON`, `SET STATISTICS IO, TIME ON`, `SET TEXTSIZE 2147483647`,
    /// `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`. Option names are upper-cased,
    /// multi-word names joined with one space (`STATISTICS IO`,
    /// `TRANSACTION ISOLATION LEVEL`).
    SetOption {
        options: Vec<String>,
        value: SetValue,
    },
    /// `ALTER TABLE t SET (LOCK_ESCALATION = TABLE | AUTO | DISABLE)`: the only ALTER
    /// TABLE built (`lock_escalation` upper-cased); any other is refused at parse.
    AlterTableLockEscalation {
        table: ObjectName,
        lock_escalation: String,
    },
    /// `ALTER INDEX { name | ALL } ON table { REBUILD | REORGANIZE | DISABLE } [WITH
    /// (...)]`; the other actions (SET, RESUME, PAUSE, ABORT) and PARTITION are refused at
    /// parse (40517).
    AlterIndex(AlterIndex),
    /// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] ADD [CONSTRAINT name] CHECK (expr)`:
    /// `check_existing` is false for WITH NOCHECK (the constraint is then not trusted).
    AlterTableAddCheck {
        table: ObjectName,
        check_existing: bool,
        check: CheckDefinition,
    },
    /// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] ADD [CONSTRAINT name] FOREIGN KEY (cols)
    /// REFERENCES t2 [(cols)] [ON DELETE ...] [ON UPDATE ...]`.
    AlterTableAddForeignKey {
        table: ObjectName,
        check_existing: bool,
        key: ForeignKeyDefinition,
    },
    /// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] { CHECK | NOCHECK } CONSTRAINT { ALL |
    /// name [, ...] }`: `enable` for CHECK; `names` None for ALL; `check_existing` is
    /// WITH CHECK's true, WITH NOCHECK's false, None without WITH.
    AlterTableConstraintState {
        table: ObjectName,
        check_existing: Option<bool>,
        enable: bool,
        names: Option<Vec<String>>,
    },
    /// `ALTER TABLE t DROP [CONSTRAINT] [IF EXISTS] name [, ...]`.
    AlterTableDropConstraint {
        table: ObjectName,
        if_exists: bool,
        names: Vec<String>,
    },
    /// `SET IDENTITY_INSERT t ON|OFF`.
    SetIdentityInsert {
        table: ObjectName,
        on: bool,
    },
    If {
        condition: Expr,
        then_branch: Box<Statement>,
        else_branch: Option<Box<Statement>>,
    },
    While {
        condition: Expr,
        body: Box<Statement>,
    },
    /// `BEGIN ... END`.
    Block(Vec<Statement>),
    /// `BEGIN TRY ... END TRY BEGIN CATCH ... END CATCH`.
    TryCatch {
        try_block: Vec<Statement>,
        catch_block: Vec<Statement>,
    },
    Break,
    Continue,
    Return(Option<Expr>),
    Print(Expr),
    Raiserror {
        message: Expr,
        severity: Expr,
        state: Expr,
        args: Vec<Expr>,
        /// Upper-cased `WITH` options: `NOWAIT`, `LOG`, `SETERROR`.
        options: Vec<String>,
    },
    /// `THROW` (rethrow, `None`) or `THROW number, message, state`.
    Throw(Option<ThrowArgs>),
    /// `WAITFOR DELAY 'hh:mm:ss'` (`delay`) or `WAITFOR TIME 'hh:mm'`.
    WaitFor {
        delay: bool,
        value: Expr,
    },
    CreateTable(CreateTable),
    CreateIndex(CreateIndex),
    /// CREATE STATISTICS name ON table (columns) [WITH ...] (exec/statistics.rs).
    CreateStatistics {
        name: String,
        table: ObjectName,
        columns: Vec<String>,
        options: StatisticsOptions,
    },
    /// DROP STATISTICS table.name [, ...]: each name's last part is the statistics'.
    DropStatistics {
        names: Vec<ObjectName>,
    },
    /// UPDATE STATISTICS table [name | (name, ...)] [WITH ...].
    UpdateStatistics {
        table: ObjectName,
        names: Vec<String>,
        options: StatisticsOptions,
    },
    /// CREATE / ALTER / CREATE OR ALTER PROCEDURE (exec/procedures.rs): the only statement
    /// of its batch, its body the rest of the batch.
    CreateProcedure(Box<ProcedureDefinition>),
    /// DROP PROC[EDURE] [IF EXISTS] name [, ...].
    DropProcedure {
        if_exists: bool,
        names: Vec<ObjectName>,
    },
    DropTable {
        if_exists: bool,
        names: Vec<ObjectName>,
    },
    TruncateTable {
        name: ObjectName,
    },
    DropIndex {
        if_exists: bool,
        indexes: Vec<IndexRef>,
    },
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Merge(Box<Merge>),
    BeginTransaction {
        name: Option<String>,
        distributed: bool,
    },
    Commit {
        name: Option<String>,
    },
    Rollback {
        name: Option<String>,
    },
    SaveTransaction {
        name: String,
    },
    Checkpoint {
        duration: Option<Expr>,
    },
    Backup(Backup),
    Restore(Restore),
    CreateLogin {
        name: String,
        from_windows: bool,
        options: Vec<WithOption>,
    },
    AlterLogin {
        name: String,
        /// `ENABLE` (true) or `DISABLE` (false).
        enable: Option<bool>,
        options: Vec<WithOption>,
    },
    DropLogin {
        name: String,
    },
    Kill {
        target: Expr,
        status_only: bool,
    },
    /// `RECONFIGURE [WITH OVERRIDE]`, which usually follows `sp_configure`.
    Reconfigure {
        with_override: bool,
    },
    /// `SHUTDOWN [WITH NOWAIT]`.
    Shutdown {
        nowait: bool,
    },
    /// `ALTER SERVER ROLE role ADD | DROP MEMBER login`.
    AlterServerRole {
        role: String,
        add: bool,
        member: String,
    },
    /// `CREATE USER name [FOR | FROM LOGIN login]` (the login defaults to the name).
    CreateUser {
        name: String,
        login: String,
    },
    DropUser {
        if_exists: bool,
        name: String,
    },
    /// `ALTER ROLE role ADD | DROP MEMBER user` (a fixed database role).
    AlterRole {
        role: String,
        add: bool,
        member: String,
    },
    /// GRANT, DENY or REVOKE.
    Permission(PermissionStatement),
}

/// What a GRANT, DENY or REVOKE does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionAction {
    Grant,
    Deny,
    Revoke,
}

/// What a permission is on: `ON OBJECT::t` / `ON t`, `ON DATABASE::d`, `ON SERVER::s`, or
/// nothing (the current database, or the server for a server permission).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Securable {
    Default,
    Server,
    Database(String),
    Object(ObjectName),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionStatement {
    pub action: PermissionAction,
    /// Upper case, words joined by one space (`SELECT`, `VIEW SERVER STATE`).
    pub permissions: Vec<String>,
    pub on: Securable,
    pub principals: Vec<String>,
    /// GRANT ... WITH GRANT OPTION.
    pub with_grant_option: bool,
    /// DENY / REVOKE ... CASCADE.
    pub cascade: bool,
}

/// A name of one to four parts (`server.database.schema.object`). Empty parts stand for
/// omitted ones (`master..sysdatabases` has an empty schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    pub parts: Vec<String>,
}

impl ObjectName {
    /// A one-part name.
    pub fn simple(name: &str) -> ObjectName {
        ObjectName {
            parts: vec![name.to_string()],
        }
    }

    /// The last part: the object (or column) itself.
    pub fn name(&self) -> &str {
        self.parts.last().map(String::as_str).unwrap_or("")
    }

    /// The part before the last (the schema for objects, the table for columns).
    pub fn qualifier(&self) -> Option<&str> {
        let n = self.parts.len();
        (n >= 2).then(|| self.parts[n - 2].as_str())
    }

    /// The part two before the last (the database for objects).
    pub fn database(&self) -> Option<&str> {
        let n = self.parts.len();
        (n >= 3).then(|| self.parts[n - 3].as_str())
    }

    /// The parts joined with dots, unquoted.
    pub fn joined(&self) -> String {
        self.parts.join(".")
    }
}

// ----------------------------------------------------------------------------------------
// Databases and files.

/// A size in a filespec after unit conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// A byte count (`5MB` is 5 * 1024 * 1024; no unit means MB). Saturates at `u64::MAX`
    /// so absurd sizes reach the executor's range check instead of wrapping.
    Bytes(u64),
    /// `UNLIMITED`; valid only for `MAXSIZE`.
    Unlimited,
    /// `n%`; valid only for `FILEGROWTH`.
    Percent(u32),
}

/// `( NAME = ..., FILENAME = ..., SIZE = ..., MAXSIZE = ..., FILEGROWTH = ... )`. Every
/// item is optional in the syntax; the executor checks what each statement requires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSpec {
    pub name: Option<String>,
    /// `NEWNAME`, only meaningful in `ALTER DATABASE ... MODIFY FILE`.
    pub new_name: Option<String>,
    pub filename: Option<String>,
    pub size: Option<Size>,
    pub max_size: Option<Size>,
    pub file_growth: Option<Size>,
    /// `OFFLINE`, only meaningful in `MODIFY FILE`.
    pub offline: bool,
}

/// `FILEGROUP fg [DEFAULT] <filespec>, ...` inside `CREATE DATABASE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilegroupDefinition {
    pub name: String,
    pub default: bool,
    pub files: Vec<FileSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateDatabase {
    pub name: String,
    /// Files before the first `FILEGROUP` (the PRIMARY filegroup).
    pub primary_files: Vec<FileSpec>,
    pub filegroups: Vec<FilegroupDefinition>,
    pub log_files: Vec<FileSpec>,
    pub collation: Option<String>,
    /// `FOR ATTACH`.
    pub for_attach: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AlterDatabaseAction {
    AddFile {
        files: Vec<FileSpec>,
        filegroup: Option<String>,
    },
    AddLogFile {
        files: Vec<FileSpec>,
    },
    AddFilegroup {
        name: String,
    },
    RemoveFilegroup {
        name: String,
    },
    RemoveFile {
        logical_name: String,
    },
    ModifyFile(FileSpec),
    ModifyName {
        new_name: String,
    },
    ModifyFilegroup {
        name: String,
        change: FilegroupChange,
    },
    Set {
        options: Vec<DatabaseOption>,
        termination: Option<Termination>,
    },
    Collate {
        collation: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilegroupChange {
    Default,
    ReadOnly,
    ReadWrite,
    AutogrowSingleFile,
    AutogrowAllFiles,
    Name(String),
    Rebalance,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryModel {
    Simple,
    Full,
    BulkLogged,
}

/// One `ALTER DATABASE ... SET` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseOption {
    SingleUser,
    MultiUser,
    RestrictedUser,
    Recovery(RecoveryModel),
    Offline,
    Online,
    Emergency,
    ReadOnly,
    ReadWrite,
    /// Any other option: the upper-cased name and the value's tokens joined with spaces
    /// (`AUTO_CLOSE OFF`, `PAGE_VERIFY CHECKSUM`, `COMPATIBILITY_LEVEL = 130`).
    Other {
        name: String,
        value: Option<String>,
    },
}

/// How `ALTER DATABASE ... SET` treats other connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    RollbackImmediate,
    RollbackAfter { seconds: u32 },
    NoWait,
}

// ----------------------------------------------------------------------------------------
// Procedures and DBCC.

/// `DBCC name [(args)] [WITH options]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dbcc {
    /// Upper-cased command name (`CHECKDB`, `TRACEON`).
    pub name: String,
    /// Arguments. Bare words (`NOINDEX`, `LOGSPACE`, a database name) are one-part
    /// [`Expr::Column`]s.
    pub args: Vec<Expr>,
    pub options: Vec<WithOption>,
}

/// `name [= value]` in a `WITH` list. Names are upper-cased.
#[derive(Debug, Clone, PartialEq)]
pub struct WithOption {
    pub name: String,
    pub value: Option<OptionValue>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// A bare word as written (`ON`, `OFF`, `CHECKSUM`, `PAGE`).
    Word(String),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Execute {
    /// `@ret` in `EXEC @ret = proc`.
    pub return_variable: Option<String>,
    pub target: ExecTarget,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExecTarget {
    Procedure {
        name: ObjectName,
        args: Vec<ExecArg>,
    },
    /// `EXEC ('SELECT ' + @x)`: the pieces to concatenate.
    Dynamic { parts: Vec<Expr> },
}

/// What a procedure's definition statement does with the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcedureMode {
    Create,
    Alter,
    CreateOrAlter,
}

/// CREATE / ALTER PROCEDURE: the name, the parameters, the body (the rest of the batch) and
/// the batch's text, kept as sys.sql_modules.definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureDefinition {
    pub mode: ProcedureMode,
    pub name: ObjectName,
    pub parameters: Vec<ProcedureParameter>,
    pub body: Vec<Statement>,
    pub definition: String,
    /// WITH RECOMPILE (sys.sql_modules.is_recompiled).
    pub recompile: bool,
}

/// `@name [AS] type [= default] [OUT | OUTPUT]` of a procedure's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureParameter {
    pub name: String,
    pub data_type: DataType,
    /// The default as parsed, and its text as written (sys.parameters has no column for
    /// it; the catalog keeps it for the definition's reader).
    pub default: Option<(Expr, String)>,
    pub output: bool,
}

/// One procedure argument. A bare word (`EXEC sp_helpdb master`) is a one-part
/// [`Expr::Column`], which T-SQL treats as a string; `DEFAULT` is [`Expr::Default`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExecArg {
    /// `@param` in `@param = value`.
    pub name: Option<String>,
    pub value: Expr,
    pub output: bool,
}

// ----------------------------------------------------------------------------------------
// Variables and types.

/// One declaration of a DECLARE: a scalar variable or a table variable.
#[derive(Debug, Clone, PartialEq)]
pub enum Declaration {
    Scalar(VariableDeclaration),
    /// `@name [AS] TABLE (columns, constraints)`: its definition as CREATE TABLE's,
    /// named `@name`, without a filegroup.
    Table(CreateTable),
}

impl Declaration {
    /// The variable's name, with its `@`.
    pub fn name(&self) -> &str {
        match self {
            Declaration::Scalar(v) => &v.name,
            Declaration::Table(t) => t.name.name(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct VariableDeclaration {
    pub name: String,
    pub data_type: DataType,
    pub initial: Option<Expr>,
}

/// A declared type. `sql_type` holds the declaration defaults (`CHAR` = `CHAR(1)`,
/// `DECIMAL` = `DECIMAL(18,0)`, `DATETIME2` = `DATETIME2(7)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataType {
    pub sql_type: SqlType,
    /// The type name as written (`varchar`, `sysname`).
    pub name: String,
    /// Whether a length was written for a character or binary type.
    pub length_given: bool,
}

impl DataType {
    /// The type as a `CAST`/`CONVERT` target: character and binary types without a
    /// length are 30 long there.
    pub fn cast_target(&self) -> SqlType {
        if self.length_given {
            return self.sql_type;
        }
        match self.sql_type {
            SqlType::Char(_) => SqlType::Char(30),
            SqlType::VarChar(_) => SqlType::VarChar(30),
            SqlType::NChar(_) => SqlType::NChar(30),
            SqlType::NVarChar(_) => SqlType::NVarChar(30),
            SqlType::Binary(_) => SqlType::Binary(30),
            SqlType::VarBinary(_) => SqlType::VarBinary(30),
            other => other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignOp {
    Assign,
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    BitAnd,
    BitOr,
    BitXor,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SetValue {
    On,
    Off,
    /// A word or words (`mdy`, `READ COMMITTED`, `LOW`), as written, joined by spaces.
    Word(String),
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ThrowArgs {
    pub number: Expr,
    pub message: Expr,
    pub state: Expr,
}

// ----------------------------------------------------------------------------------------
// Queries.

/// A query expression with its optional WITH (common table expressions), ORDER BY,
/// OFFSET/FETCH and OPTION clauses.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// `WITH name [(cols)] AS (query), ...` before a statement-level SELECT.
    pub ctes: Vec<CommonTableExpression>,
    pub body: QueryBody,
    pub order_by: Vec<OrderByItem>,
    pub offset: Option<Expr>,
    pub fetch: Option<Expr>,
    /// `OPTION (...)` hints, each as its tokens joined by spaces, upper-cased.
    pub hints: Vec<String>,
}

impl Query {
    /// A query of `body` alone: no CTEs, ORDER BY, OFFSET / FETCH or hints.
    pub fn of_body(body: QueryBody) -> Query {
        Query {
            ctes: Vec::new(),
            body,
            order_by: Vec::new(),
            offset: None,
            fetch: None,
            hints: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommonTableExpression {
    pub name: String,
    pub columns: Vec<String>,
    pub query: Box<Query>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum QueryBody {
    Select(Box<Select>),
    SetOperation {
        op: SetOperator,
        left: Box<QueryBody>,
        right: Box<QueryBody>,
    },
    Parenthesized(Box<Query>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOperator {
    Union,
    UnionAll,
    Except,
    Intersect,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub distinct: bool,
    pub top: Option<Top>,
    pub items: Vec<SelectItem>,
    pub into: Option<ObjectName>,
    /// Comma-separated table sources (an implicit cross join).
    pub from: Vec<TableSource>,
    pub where_clause: Option<Expr>,
    /// Each distinct grouping expression once when `grouping_sets` is Some; else the
    /// plain GROUP BY list as written.
    pub group_by: Vec<Expr>,
    /// ROLLUP, CUBE, GROUPING SETS, `()`, WITH ROLLUP / CUBE: the grouping sets, each
    /// sorted indexes into `group_by` (parser/grouping.rs); None for a plain GROUP BY.
    pub grouping_sets: Option<Vec<Vec<usize>>>,
    pub having: Option<Expr>,
}

impl Select {
    /// `SELECT items` and nothing else (no FROM, WHERE or grouping): a select list the
    /// executor runs over rows it has already.
    pub fn of_items(items: Vec<SelectItem>) -> Select {
        Select {
            distinct: false,
            top: None,
            items,
            into: None,
            from: Vec::new(),
            where_clause: None,
            group_by: Vec::new(),
            grouping_sets: None,
            having: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Top {
    pub count: Expr,
    pub percent: bool,
    pub with_ties: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*` or `t.*`.
    Wildcard { qualifier: Option<ObjectName> },
    /// `expr [AS] alias` or `alias = expr`.
    Expr { expr: Expr, alias: Option<String> },
    /// `@v = expr` (assignment select).
    Assign {
        variable: String,
        op: AssignOp,
        value: Expr,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderByItem {
    pub expr: Expr,
    pub descending: bool,
}

/// One column of OPENJSON's `WITH` schema.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonColumn {
    pub name: String,
    pub data_type: DataType,
    /// The column's JSON path; `$.name` when none is written.
    pub path: Option<String>,
    /// `AS JSON`: the column holds the object or array at the path, as written.
    pub as_json: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TableSource {
    Table {
        name: ObjectName,
        alias: Option<String>,
        /// Table hints, upper-cased (`NOLOCK`, `INDEX(1)`); parsed and kept, not enforced.
        hints: Vec<String>,
    },
    /// `(SELECT ...) AS x [(c, ...)]`, and `(VALUES (...), ...) AS x [(c, ...)]` as a
    /// UNION ALL of one SELECT per row (`columns`: the derived column list, maybe empty).
    Derived {
        query: Box<Query>,
        alias: String,
        columns: Vec<String>,
    },
    /// A table-valued function (`sys.fn_dblog(NULL, NULL)`, `STRING_SPLIT(s, ',') AS x(v)`).
    Function {
        name: ObjectName,
        args: Vec<Expr>,
        alias: Option<String>,
        /// The column aliases after the alias (maybe empty).
        columns: Vec<String>,
        /// OPENJSON's explicit schema, `WITH (col type ['path'] [AS JSON], ...)`.
        schema: Option<Vec<JsonColumn>>,
    },
    /// `source PIVOT (agg(argument) FOR column IN ([v], ...)) AS alias`.
    Pivot {
        source: Box<TableSource>,
        aggregate: ObjectName,
        argument: ObjectName,
        column: ObjectName,
        /// The IN list's identifiers: the output columns' names, and the values compared.
        values: Vec<String>,
        alias: String,
    },
    /// `source UNPIVOT (value FOR name IN (c, ...)) AS alias`.
    Unpivot {
        source: Box<TableSource>,
        value: String,
        name: String,
        columns: Vec<String>,
        alias: String,
    },
    Join {
        left: Box<TableSource>,
        kind: JoinKind,
        right: Box<TableSource>,
        /// `None` for CROSS JOIN and APPLY.
        on: Option<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    Inner,
    Left,
    Right,
    Full,
    Cross,
    CrossApply,
    OuterApply,
}

// ----------------------------------------------------------------------------------------
// Expressions.

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Null,
    /// An integer literal that fits `i64` (the executor picks INT, BIGINT or NUMERIC).
    Integer(i64),
    /// A decimal literal, or an integer too large for `i64`: `unscaled / 10^scale`.
    Decimal {
        unscaled: i128,
        precision: u8,
        scale: u8,
    },
    Float(f64),
    String {
        value: String,
        national: bool,
    },
    Binary(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Negate,
    Plus,
    BitNot,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Multiply,
    Divide,
    Modulo,
    Add,
    Subtract,
    BitAnd,
    BitOr,
    BitXor,
    Equal,
    NotEqual,
    Less,
    Greater,
    LessOrEqual,
    GreaterOrEqual,
    /// `!<`
    NotLess,
    /// `!>`
    NotGreater,
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Literal),
    /// `@name` (with the `@`).
    Variable(String),
    /// `@@name` (with the `@@`).
    GlobalVariable(String),
    /// A column reference of one to four parts.
    Column(ObjectName),
    /// The date part argument of DATEADD, DATEDIFF, DATEDIFF_BIG, DATEPART, DATENAME and
    /// DATETRUNC, as written (`MILLISECOND`, `ms`, `dd`).
    DatePart(String),
    /// A function call. Niladic keywords (`CURRENT_TIMESTAMP`) have no arguments.
    Function {
        name: ObjectName,
        args: Vec<Expr>,
        distinct: bool,
        /// `COUNT(*)`.
        star: bool,
    },
    Cast {
        expr: Box<Expr>,
        data_type: DataType,
        try_cast: bool,
    },
    Convert {
        data_type: DataType,
        expr: Box<Expr>,
        style: Option<Box<Expr>>,
        try_convert: bool,
    },
    Case {
        operand: Option<Box<Expr>>,
        branches: Vec<(Expr, Expr)>,
        else_result: Option<Box<Expr>>,
    },
    Unary {
        op: UnaryOp,
        expr: Box<Expr>,
    },
    Binary {
        left: Box<Expr>,
        op: BinaryOp,
        right: Box<Expr>,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: Option<Box<Expr>>,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    InSubquery {
        expr: Box<Expr>,
        subquery: Box<Query>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    /// `EXISTS (subquery)`; `NOT EXISTS` is `Unary { Not, Exists }`.
    Exists(Box<Query>),
    Subquery(Box<Query>),
    Collate {
        expr: Box<Expr>,
        collation: String,
    },
    /// `DEFAULT` in a VALUES row or a procedure argument.
    Default,
    /// A window function: a call with an OVER clause (`exec/window.rs`).
    Window(Box<WindowCall>),
}

/// `function(args) OVER ([PARTITION BY ...] [ORDER BY ...] [ROWS | RANGE frame])`.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCall {
    /// The call before OVER: an [`Expr::Function`].
    pub function: Expr,
    pub partition_by: Vec<Expr>,
    pub order_by: Vec<OrderByItem>,
    pub frame: Option<WindowFrame>,
}

/// A window frame; the one-bound forms (`ROWS 2 PRECEDING`) end at CURRENT ROW.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowFrame {
    /// ROWS (true) counts rows; RANGE (false) takes a row's peers with it.
    pub rows: bool,
    pub start: FrameBound,
    pub end: FrameBound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(u64),
    CurrentRow,
    Following(u64),
    UnboundedFollowing,
}

// ----------------------------------------------------------------------------------------
// Tables, indexes and data modification.

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: ObjectName,
    pub columns: Vec<ColumnDefinition>,
    pub constraints: Vec<TableConstraint>,
    /// `ON fg`; `PRIMARY` for `ON [PRIMARY]`.
    pub filegroup: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDefinition {
    pub name: String,
    /// The declared type; for a computed column (`computed`) none is declared and this is
    /// unused: its type is its expression's (computed_columns.rs).
    pub data_type: DataType,
    /// `name AS expression [PERSISTED]`: a computed column.
    pub computed: Option<ComputedDefinition>,
    /// `Some(true)` for `NULL`, `Some(false)` for `NOT NULL`, `None` when unsaid.
    pub nullable: Option<bool>,
    pub identity: Option<Identity>,
    pub default: Option<ColumnDefault>,
    /// An inline `PRIMARY KEY` or `UNIQUE` constraint.
    pub key: Option<KeyConstraint>,
    /// Inline `[CONSTRAINT name] CHECK (expr)` constraints, in order.
    pub checks: Vec<CheckDefinition>,
    /// Inline `[CONSTRAINT name] [FOREIGN KEY] REFERENCES t2 [(col)]`, in order.
    pub foreign_keys: Vec<ForeignKeyDefinition>,
    pub collation: Option<String>,
}

/// A computed column's `AS expression [PERSISTED]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputedDefinition {
    pub expr: Expr,
    pub persisted: bool,
}

/// `IDENTITY[(seed, increment)]`; both default to 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub seed: i64,
    pub increment: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDefault {
    /// The `CONSTRAINT name` before `DEFAULT`, if any.
    pub name: Option<String>,
    pub expr: Expr,
}

/// A `PRIMARY KEY` or `UNIQUE` constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyConstraint {
    pub name: Option<String>,
    pub primary: bool,
    /// `Some(true)` for CLUSTERED, `Some(false)` for NONCLUSTERED.
    pub clustered: Option<bool>,
    /// Empty for an inline column constraint.
    pub columns: Vec<IndexColumn>,
    pub options: Vec<WithOption>,
    pub filegroup: Option<String>,
}

/// `[CONSTRAINT name] CHECK (expr)`, inline on a column or at table level.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckDefinition {
    pub name: Option<String>,
    pub expr: Expr,
}

/// `[CONSTRAINT name] FOREIGN KEY (columns) REFERENCES table [(referenced)] [ON DELETE
/// action] [ON UPDATE action]`; inline on a column, `columns` is empty (the column itself).
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignKeyDefinition {
    pub name: Option<String>,
    pub columns: Vec<String>,
    pub table: ObjectName,
    /// Empty: the referenced table's primary key.
    pub referenced: Vec<String>,
    pub on_delete: ReferentialAction,
    pub on_update: ReferentialAction,
}

/// ON DELETE / ON UPDATE of a FOREIGN KEY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferentialAction {
    NoAction,
    Cascade,
    SetNull,
    SetDefault,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TableConstraint {
    Key(KeyConstraint),
    Check(CheckDefinition),
    ForeignKey(ForeignKeyDefinition),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexColumn {
    pub name: String,
    pub descending: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndex {
    pub unique: bool,
    pub clustered: Option<bool>,
    pub name: String,
    pub table: ObjectName,
    pub columns: Vec<IndexColumn>,
    pub include: Vec<String>,
    pub filter: Option<Expr>,
    pub options: Vec<WithOption>,
    pub filegroup: Option<String>,
}

/// How a statistics build reads its table (CREATE / UPDATE STATISTICS' WITH).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum StatisticsSample {
    /// No sampling option: the engine's default (every row here).
    #[default]
    Default,
    FullScan,
    /// SAMPLE n PERCENT (0 to 100).
    Percent(f64),
    /// SAMPLE n ROWS.
    Rows(u64),
    /// RESAMPLE: the rate of the last build (UPDATE STATISTICS only).
    Resample,
}

/// Which statistics UPDATE STATISTICS without names reaches: ALL (the default), COLUMNS
/// (those of CREATE STATISTICS) or INDEX (the indexes').
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatisticsKinds {
    #[default]
    All,
    Columns,
    Index,
}

/// CREATE / UPDATE STATISTICS' WITH options that are built.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StatisticsOptions {
    pub sample: StatisticsSample,
    pub no_recompute: bool,
    pub kinds: StatisticsKinds,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterIndex {
    /// The index's name; None for ALL.
    pub index: Option<String>,
    pub table: ObjectName,
    pub action: IndexAction,
    pub options: Vec<WithOption>,
}

/// What ALTER INDEX does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexAction {
    Rebuild,
    Reorganize,
    Disable,
}

/// `index ON table`, or the old `table.index` form (then `table` holds the qualifier).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRef {
    pub index: String,
    pub table: ObjectName,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub top: Option<Top>,
    pub table: ObjectName,
    pub hints: Vec<String>,
    pub columns: Vec<String>,
    pub output: Option<OutputClause>,
    pub source: InsertSource,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertSource {
    Values(Vec<Vec<Expr>>),
    DefaultValues,
    Query(Box<Query>),
    Execute(Box<Execute>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub top: Option<Top>,
    pub table: ObjectName,
    pub hints: Vec<String>,
    pub assignments: Vec<Assignment>,
    pub output: Option<OutputClause>,
    pub from: Vec<TableSource>,
    pub where_clause: Option<Expr>,
    /// `OPTION (...)`'s query hints, upper-cased as a SELECT's are.
    pub options: Vec<String>,
}

/// `[WITH ctes] MERGE [TOP (n) [PERCENT]] [INTO] target [WITH (hints)] [[AS] alias] USING
/// source ON cond WHEN ... [OUTPUT ...] [OPTION (...)];`
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    pub ctes: Vec<CommonTableExpression>,
    pub top: Option<Top>,
    pub target: ObjectName,
    pub hints: Vec<String>,
    pub alias: Option<String>,
    pub source: TableSource,
    pub on: Expr,
    /// In written order: each row takes the first clause of its kind whose AND holds.
    pub clauses: Vec<MergeClause>,
    pub output: Option<OutputClause>,
    /// `OPTION (...)` hints, as a query's.
    pub options: Vec<String>,
}

/// One `WHEN ... [AND cond] THEN action` of a MERGE.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeClause {
    pub when: MergeWhen,
    pub condition: Option<Expr>,
    pub action: MergeAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeWhen {
    Matched,
    NotMatchedByTarget,
    NotMatchedBySource,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MergeAction {
    Update(Vec<Assignment>),
    Delete,
    /// `INSERT [(columns)] VALUES (...)`; `values` None for `DEFAULT VALUES`.
    Insert {
        columns: Vec<String>,
        values: Option<Vec<Expr>>,
    },
}

/// `OUTPUT items [INTO target [(columns)]]` of INSERT, UPDATE and DELETE; `$action`
/// stands as the column reference `$action` (MERGE's, refused elsewhere).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputClause {
    pub items: Vec<SelectItem>,
    pub into: Option<OutputInto>,
    /// A second clause (`OUTPUT ... INTO t OUTPUT ...`): the rows also go to the client.
    pub also: Option<Box<OutputClause>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputInto {
    pub target: OutputTarget,
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutputTarget {
    Table(ObjectName),
    /// `@name`, a table variable.
    Variable(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub target: AssignTarget,
    pub op: AssignOp,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AssignTarget {
    Column(ObjectName),
    Variable(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    pub top: Option<Top>,
    pub table: ObjectName,
    pub hints: Vec<String>,
    pub output: Option<OutputClause>,
    pub from: Vec<TableSource>,
    pub where_clause: Option<Expr>,
    /// `OPTION (...)`'s query hints, upper-cased as a SELECT's are.
    pub options: Vec<String>,
}

// ----------------------------------------------------------------------------------------
// Backup and restore.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupKind {
    Database,
    Log,
}

/// `DISK = 'path'`, `URL = '...'`, or a logical device name (`kind` empty).
#[derive(Debug, Clone, PartialEq)]
pub struct BackupDevice {
    /// Upper-cased device type: `DISK`, `URL`, `TAPE`; empty for a logical device.
    pub kind: String,
    pub path: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum BackupOption {
    Named(WithOption),
    /// `MOVE 'logical' TO 'physical'`.
    Move {
        logical: Expr,
        physical: Expr,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Backup {
    pub kind: BackupKind,
    pub database: String,
    pub devices: Vec<BackupDevice>,
    pub options: Vec<BackupOption>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreKind {
    Database,
    Log,
    VerifyOnly,
    FileListOnly,
    HeaderOnly,
    LabelOnly,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Restore {
    pub kind: RestoreKind,
    /// The database for `RESTORE DATABASE|LOG`; `None` for the *ONLY forms.
    pub database: Option<String>,
    pub devices: Vec<BackupDevice>,
    pub options: Vec<BackupOption>,
}
