//! SQL Server's messages: the one place where a failure becomes a message number,
//! severity, state and text, so that every client (sqlcmd-style output, the error log,
//! later TDS) shows the same `Msg`.
//!
//! The catalogue keeps each template in SQL Server's own `sys.messages` form (`%.*ls`,
//! `%d`, `%I64d`, `%S_MSG`, `%S_PGID` ...) so a row can be compared with the original
//! character for character. [`msg`] fills the placeholders in order, one argument each;
//! the caller formats special values itself (a page id as `(1:153)`, an offset as
//! `0x0000000000012000`, an OS error with [`os_error_text`]).
//!
//! Invariants:
//! 1. Every number passed to [`msg`] should be in the catalogue; an unknown number still
//!    gives a usable error (severity 16) rather than a panic, so a typo is visible in output.
//! 2. The line number is 0 here; the executor fills it in where the statement is known.
//!
//! This module does not decide *when* an error is raised, nor print it (see `render`).

use std::fmt;

/// One SQL Server error or informational message, as sent to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    pub number: i32,
    pub severity: u8,
    pub state: u8,
    pub text: String,
    /// The batch line, 1-based; 0 until the executor knows it.
    pub line: u32,
    pub procedure: Option<String>,
}

impl SqlError {
    /// A PRINT message (or an informational text without a number of its own): number 0,
    /// severity 0, state 1, as SQL Server sends PRINT.
    pub fn print(text: String) -> SqlError {
        SqlError {
            number: 0,
            severity: 0,
            state: 1,
            text,
            line: 0,
            procedure: None,
        }
    }

    /// The same message with another state; SQL Server uses the state to tell apart the
    /// places that raise one number.
    pub fn with_state(mut self, state: u8) -> SqlError {
        self.state = state;
        self
    }

    /// The same message attributed to a batch line.
    pub fn with_line(mut self, line: u32) -> SqlError {
        self.line = line;
        self
    }

    /// The same message raised inside system procedure `name` at line `line` of its text,
    /// as clients show it (`Procedure sp_helpdb, Line 45`).
    pub fn in_procedure(mut self, name: &str, line: u32) -> SqlError {
        self.procedure = Some(name.to_string());
        self.line = line;
        self
    }

    /// True for severity 10 and below, which clients print as plain text, not as `Msg`.
    pub fn is_info(&self) -> bool {
        self.severity <= 10
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Msg {}, Level {}, State {}: {}",
            self.number, self.severity, self.state, self.text
        )
    }
}

impl std::error::Error for SqlError {}

/// One row of the catalogue: number, severity, the state SQL Server most often raises the
/// message with, and the `sys.messages` template.
struct Entry {
    number: i32,
    severity: u8,
    state: u8,
    template: &'static str,
}

const fn e(number: i32, severity: u8, state: u8, template: &'static str) -> Entry {
    Entry {
        number,
        severity,
        state,
        template,
    }
}

/// The catalogue. Texts were compared with Microsoft's "Database engine events and
/// errors" tables unless marked `// unverified` (then from SQL Server's observed output).
/// Default states are those SQL Server is usually seen raising; raisers adjust with
/// [`SqlError::with_state`].
#[rustfmt::skip]
static CATALOGUE: &[Entry] = &[
    e(102, 15, 1, "Incorrect syntax near '%.*ls'."),
    e(193, 15, 1, "The object or column name starting with '%.*ls' is too long. The maximum length is %d characters."),
    e(103, 15, 4, "The %S_MSG that starts with '%.*ls' is too long. Maximum length is %d."),
    e(216, 16, 1, "Parameters were not supplied for the function '%.*ls'."),
    e(1702, 16, 1, "CREATE TABLE failed because column '%.*ls' in table '%.*ls' exceeds the maximum of 1024 columns."),
    e(226, 16, 6, "%ls statement not allowed within multi-statement transaction."),
    e(1823, 16, 2, "A database snapshot cannot be created because it failed to start."),
    e(3314, 21, 3, "During undoing of a logged operation in database '%.*ls', an error occurred at log record ID %S_LSN. Typically, the specific failure is logged previously as an error in the operating system error log. Restore the database or file from a backup, or repair the database."),
    e(229, 14, 5, "The %ls permission was denied on the object '%.*ls', database '%.*ls', schema '%.*ls'."),
    e(262, 14, 1, "%ls permission denied in database '%.*ls'."),
    e(297, 16, 1, "The user does not have permission to perform this action."),
    e(300, 14, 1, "%ls permission was denied on object '%.*ls', database '%.*ls'."),
    e(916, 14, 2, "The server principal \"%.*ls\" is not able to access the database \"%.*ls\" under the current security context."),
    e(2571, 14, 3, "User '%.*ls' does not have permission to run DBCC %.*ls."),
    e(3110, 14, 1, "User does not have permission to RESTORE database '%.*ls'."),
    e(4613, 16, 1, "Grantor does not have GRANT permission."),
    e(5243, 22, 1, "An inconsistency was detected during an internal operation. Please contact technical support. Reference number %ld."),
    e(5812, 14, 1, "You do not have permission to run the RECONFIGURE statement."),
    e(574, 16, 0, "CONFIG statement cannot be used inside a user transaction."),
    e(5808, 16, 1, "Ad hoc update to system catalogs is not supported."),
    e(3634, 16, 1, "The operating system returned the error '%ls' while attempting '%ls' on '%ls'."),
    e(15123, 16, 1, "The configuration option '%s' does not exist, or it may be an advanced option."),
    e(15124, 16, 1, "The configuration option '%s' is not unique."),
    e(15129, 16, 1, "'%d' is not a valid value for configuration option '%s'."),
    e(15457, 10, 1, "Configuration option '%ls' changed from %ld to %ld. Run the RECONFIGURE statement to install."),
    e(6101, 14, 1, "User does not have permission to use the SHUTDOWN statement."),
    e(6102, 14, 1, "User does not have permission to use the KILL statement."),
    e(8630, 17, 1, "Internal Query Processor Error: The query processor encountered an unexpected error during execution (HRESULT = %#x)."),
    e(9001, 21, 5, "The log for database '%.*ls' is not available. Check the operating system error log for related error messages. Resolve any errors and restart the database."), // unverified state
    e(9004, 21, 1, "An error occurred while processing the log for database '%.*ls'.  If possible, restore from backup. If a backup is not available, it might be necessary to rebuild the log."),
    e(15007, 16, 1, "'%s' is not a valid login or you do not have permission."),
    e(15023, 16, 1, "User, group, or role '%s' already exists in the current database."),
    e(15063, 16, 1, "The login already has an account under a different user name."),
    e(105, 15, 1, "Unclosed quotation mark after the character string '%.*ls'."),
    e(113, 15, 1, "Missing end comment mark '*/'."),
    e(134, 15, 1, "The variable name '%.*ls' has already been declared. Variable names must be unique within a query batch or stored procedure."),
    e(137, 15, 2, "Must declare the scalar variable \"%.*ls\"."),
    e(1087, 15, 2, "Must declare the table variable \"%.*ls\"."),
    e(148, 15, 1, "Incorrect time syntax in time string '%.*ls' used with WAITFOR."),
    e(155, 15, 1, "'%.*ls' is not a recognized %ls option."),
    e(156, 15, 1, "Incorrect syntax near the keyword '%.*ls'."),
    e(174, 15, 1, "The %.*ls function requires %d argument(s)."),
    e(189, 15, 1, "The %ls function requires %d to %d arguments."),
    e(195, 15, 10, "'%.*ls' is not a recognized %S_MSG."),
    e(206, 16, 2, "Operand type clash: %ls is incompatible with %ls"),
    e(107, 15, 1, "The column prefix '%.*ls' does not match with a table name or alias name used in the query."),
    e(116, 16, 1, "Only one expression can be specified in the select list when the subquery is not introduced with EXISTS."),
    e(205, 16, 1, "All queries combined using a UNION, INTERSECT or EXCEPT operator must have an equal number of expressions in their target lists."),
    e(207, 16, 1, "Invalid column name '%.*ls'."),
    e(208, 16, 1, "Invalid object name '%.*ls'."),
    e(119, 15, 1, "Must pass parameter number %d and subsequent parameters as '@name = value'. After the form '@name = value' has been used, all subsequent parameters must be passed in the form '@name = value'."),
    e(179, 15, 1, "Cannot use the OUTPUT option when passing a constant to a stored procedure."),
    e(201, 16, 4, "Procedure or function '%.*ls' expects parameter '%.*ls', which was not supplied."),
    e(217, 16, 1, "Maximum stored procedure, function, trigger, or view nesting level exceeded (limit %d)."),
    e(266, 16, 2, "Transaction count after EXECUTE indicates a mismatching number of BEGIN and COMMIT statements. Previous count = %ld, current count = %ld."),
    e(8162, 16, 2, "The formal parameter \"%.*ls\" was not declared as an OUTPUT parameter, but the actual parameter passed in requested output."),
    e(166, 15, 1, "'%ls' does not allow specifying the database name as a prefix to the object name."),
    e(209, 16, 1, "Ambiguous column name '%.*ls'."),
    e(213, 16, 1, "Column name or number of supplied values does not match table definition."),
    e(8164, 16, 1, "An INSERT EXEC statement cannot be nested."),
    e(120, 15, 1, "The select list for the INSERT statement contains fewer items than the insert list. The number of SELECT values must match the number of INSERT columns."),
    e(121, 15, 1, "The select list for the INSERT statement contains more items than the insert list. The number of SELECT values must match the number of INSERT columns."),
    e(8154, 16, 1, "The table '%.*ls' is ambiguous."),
    e(5333, 16, 1, "The identifier '%.*ls' cannot be bound. Only source columns and columns in the clause scope are allowed in the 'WHEN NOT MATCHED' clause of a MERGE statement."),
    e(5334, 16, 1, "The identifier '%.*ls' cannot be bound. Only target columns and columns in the clause scope are allowed in the 'WHEN NOT MATCHED BY SOURCE' clause of a MERGE statement."),
    e(8655, 16, 1, "The query processor is unable to produce a plan because the index '%.*ls' on table or view '%.*ls' is disabled."), // unverified state
    e(8672, 16, 1, "The MERGE statement attempted to UPDATE or DELETE the same row more than once. This happens when a target row matches more than one source row. A MERGE statement cannot UPDATE/DELETE the same row of the target table multiple times. Refine the ON clause to ensure a target row matches at most one source row, or use the GROUP BY clause to group the source rows."),
    e(220, 16, 2, "Arithmetic overflow error for data type %ls, value = %ld."),
    e(246, 16, 1, "No anchor member was specified for recursive query \"%.*ls\"."),
    e(252, 16, 1, "Recursive common table expression '%.*ls' does not contain a top-level UNION ALL operator."),
    e(310, 15, 1, "The value %d specified for the MAXRECURSION option exceeds the allowed maximum of %d."),
    e(530, 16, 1, "The statement terminated. The maximum recursion %d has been exhausted before statement completion."),
    e(512, 16, 1, "Subquery returned more than 1 value. This is not permitted when the subquery follows =, !=, <, <= , >, >= or when the subquery is used as an expression."),
    e(1013, 16, 1, "The objects \"%.*ls\" and \"%.*ls\" in the FROM clause have the same exposed names. Use correlation names to distinguish them."),
    e(1038, 15, 4, "An object or column name is missing or empty. For SELECT INTO statements, verify each column has a name. For other statements, look for empty alias names. Aliases defined as \"\" or [] are not allowed. Change the alias to a valid name."),
    e(127, 15, 1, "A TOP N value may not be negative."),
    e(1031, 15, 1, "Percent values must be between 0 and 100."), // unverified number, severity and state
    e(1062, 16, 1, "The TOP N WITH TIES clause is not allowed without a corresponding ORDER BY clause."),
    e(4108, 15, 1, "Windowed functions can only appear in the SELECT or ORDER BY clauses."),
    e(4109, 15, 1, "Windowed functions cannot be used in the context of another windowed function or aggregate."), // unverified severity: sys.messages says 16; SQL Server is seen raising it at 15, as it does 4108
    e(4112, 15, 1, "The function '%.*ls' must have an OVER clause with ORDER BY."),
    e(4113, 15, 4, "The function '%.*ls' is not a valid windowing function, and cannot be used with the OVER clause."),
    e(4116, 15, 1, "The function 'ntile' takes only a positive int or bigint expression as its input."),
    e(4193, 16, 1, "'%.*ls' is not a valid window frame and cannot be used with the OVER clause."),
    e(4194, 16, 1, "RANGE is only supported with UNBOUNDED and CURRENT ROW window frame delimiters."),
    e(5308, 16, 1, "Windowed functions, aggregates and NEXT VALUE FOR functions do not support integer indices as ORDER BY clause expressions."),
    e(5309, 16, 1, "Windowed functions, aggregates and NEXT VALUE FOR functions do not support constants as ORDER BY clause expressions."),
    e(8730, 16, 1, "Offset parameter for Lag and Lead functions cannot be a negative value."),
    e(10752, 15, 3, "The function '%.*ls' may not have a window frame."),
    e(10753, 15, 3, "The function '%.*ls' must have an OVER clause."),
    e(10756, 15, 1, "Window frame with ROWS or RANGE must have an ORDER BY clause."),
    e(10759, 15, 1, "Use of DISTINCT is not allowed with the OVER clause."),
    e(10741, 15, 1, "A TOP can not be used in the same query or sub-query as a OFFSET."),
    e(10742, 15, 1, "The offset specified in a OFFSET clause may not be negative."),
    e(10744, 15, 1, "The number of rows provided for a FETCH clause must be greater then zero."),
    e(8158, 16, 1, "'%.*ls' has more columns than were specified in the column list."),
    e(8159, 16, 1, "'%.*ls' has fewer columns than were specified in the column list."),
    e(8155, 16, 2, "No column name was specified for column %d of '%.*ls'."),
    e(8156, 16, 1, "The column '%.*ls' was specified multiple times for '%.*ls'."),
    e(265, 16, 1, "The column name \"%.*ls\" specified in the %ls operator conflicts with the existing column name in the %ls argument."),
    e(473, 16, 1, "The incorrect value \"%.*ls\" is supplied in the PIVOT operator."),
    e(8167, 16, 1, "The type of column \"%.*ls\" conflicts with the type of other columns specified in the UNPIVOT list."),
    e(232, 16, 3, "Arithmetic overflow error for type %ls, value = %f."),
    e(241, 16, 1, "Conversion failed when converting date and/or time from character string."),
    e(242, 16, 3, "The conversion of a %ls data type to a %ls data type resulted in an out-of-range value."),
    e(244, 16, 2, "The conversion of the %ls value '%.*ls' overflowed an %hs column. Use a larger integer column."),
    e(245, 16, 1, "Conversion failed when converting the %ls value '%.*ls' to data type %ls."),
    e(248, 16, 1, "The conversion of the %ls value '%.*ls' overflowed an int column."),
    e(257, 16, 3, "Implicit conversion from data type %ls to %ls is not allowed. Use the CONVERT function to run this query."),
    e(281, 16, 1, "%d is not a valid style number when converting from %ls to a character string."),
    e(402, 16, 1, "The data types %s and %s are incompatible in the %s operator."),
    e(507, 16, 2, "Invalid argument for SET ROWCOUNT. Must be a non-null non-negative integer."),
    e(515, 16, 2, "Cannot insert the value NULL into column '%.*ls', table '%.*ls'; column does not allow nulls. %ls fails."),
    e(517, 16, 1, "Adding a value to a '%ls' column caused an overflow."),
    e(529, 16, 2, "Explicit conversion from data type %ls to %ls is not allowed."),
    e(535, 16, 0, "The datediff function resulted in an overflow. The number of dateparts separating two date/time instances is too large. Try to use datediff with a less precise datepart."),
    e(536, 16, 1, "Invalid length parameter passed to the %ls function."),
    e(601, 12, 3, "Could not continue scan with NOLOCK due to data movement."),
    e(701, 17, 123, "There is insufficient system memory in resource pool '%ls' to run this query."),
    e(823, 24, 2, "The operating system returned error %ls to SQL Server during a %S_MSG at offset %#016I64x in file '%ls'. Additional messages in the SQL Server error log and system event log may provide more detail. This is a severe system-level error condition that threatens database integrity and must be corrected immediately. Complete a full database consistency check (DBCC CHECKDB). This error can be caused by many factors; for more information, see SQL Server Books Online."),
    e(824, 24, 2, "SQL Server detected a logical consistency-based I/O error: %ls. It occurred during a %S_MSG of page %S_PGID in database ID %d at offset %#016I64x in file '%ls'. Additional messages in the SQL Server error log or system event log may provide more detail. This is a severe error condition that threatens database integrity and must be corrected immediately. Complete a full database consistency check (DBCC CHECKDB). This error can be caused by many factors; for more information, see SQL Server Books Online."),
    e(3009, 16, 1, "Could not insert a backup or restore history/detail record in the msdb database. This may indicate a problem with the msdb database. The backup/restore operation was still successful."),
    e(3014, 10, 1, "%hs successfully processed %d pages in %d.%03d seconds (%d.%03d MB/sec)."),
    e(3043, 16, 1, "BACKUP '%ls' detected an error on page (%d:%d) in file '%ls'."),
    e(3101, 16, 1, "Exclusive access could not be obtained because the database is in use."),
    e(3102, 16, 1, "RESTORE cannot process database '%.*ls' because it is in use by this session. It is recommended that the master database be used when performing this operation."),
    e(3135, 16, 2, "The backup set in file '%ls' was created by %hs and cannot be used for this restore operation."),
    e(3147, 16, 1, "Backup and restore operations are not allowed on database tempdb."),
    e(3154, 16, 4, "The backup set holds a backup of a database other than the existing '%ls' database."),
    e(3156, 16, 4, "File '%ls' cannot be restored to '%ls'. Use WITH MOVE to identify a valid location for the file."),
    e(3159, 16, 1, "The tail of the log for the database \"%ls\" has not been backed up. Use BACKUP LOG WITH NORECOVERY to backup the log if it contains work you do not want to lose. Use the WITH REPLACE or WITH STOPAT clause of the RESTORE statement to just overwrite the contents of the log."),
    e(3035, 16, 1, "Cannot perform a differential backup for database \"%ls\", because a current database backup does not exist. Perform a full database backup by reissuing BACKUP DATABASE, omitting the WITH DIFFERENTIAL option."),
    e(3108, 16, 1, "To restore the master database, the server must be running in single-user mode. For information on starting in single-user mode, see \"How to: Start an Instance of SQL Server (sqlservr.exe)\" in Books Online."),
    e(3117, 16, 1, "The log or differential backup cannot be restored because no files are ready to rollforward."),
    e(3136, 16, 1, "This differential backup cannot be restored because the database has not been restored to the correct earlier state."),
    e(4208, 16, 1, "The statement %hs is not allowed while the recovery model is SIMPLE. Use BACKUP DATABASE or change the recovery model using ALTER DATABASE."),
    e(4214, 16, 1, "BACKUP LOG cannot be performed because there is no current database backup."),
    e(4305, 16, 1, "The log in this backup set begins at LSN %.*ls, which is too recent to apply to the database. An earlier log backup that includes LSN %.*ls can be restored."),
    e(4322, 10, 1, "This backup set contains records that were logged before the designated point in time. The database is being left in the restoring state so that more roll forward can be performed."),
    e(4326, 16, 1, "The log in this backup set terminates at LSN %.*ls, which is too early to apply to the database. A more recent log backup that includes LSN %.*ls can be restored."),
    e(927, 14, 1, "Database '%.*ls' cannot be opened. It is in the middle of a restore."),
    e(3201, 16, 2, "Cannot open backup device '%ls'. Operating system error %ls."),
    e(3211, 10, 1, "%d percent processed."),
    e(3262, 10, 1, "The backup set on file %d is valid."),
    e(3234, 16, 2, "Logical file '%.*ls' is not part of database '%ls'. Use RESTORE FILELISTONLY to list the logical file names."),
    e(22048, 16, 1, "%ls() returned error %d, '%ls'"), // unverified text and state
    e(3202, 16, 1, "Write on \"%ls\" failed: %ls"), // unverified state
    e(3217, 16, 1, "Invalid value specified for %ls parameter."), // unverified state
    e(3250, 16, 1, "The value '%d' is not within range for the %ls parameter."), // unverified state
    e(3253, 16, 1, "The block size parameter must supply a value that is a power of 2."), // unverified state
    e(3031, 16, 1, "Option '%ls' conflicts with option(s) '%ls'. Remove the conflicting option and reissue the statement."), // unverified state
    e(4030, 16, 1, "The medium on device '%ls' expires on %hs and cannot be overwritten."), // the table says severity 10; raised before 3013 as an error (unverified)
    e(4037, 16, 1, "The user-specified MEDIANAME \"%.*ls\" does not match the MEDIANAME \"%ls\" of the device \"%ls\"."), // unverified state
    e(4035, 10, 1, "Processed %I64d pages for database '%ls', file '%ls' on file %d."),
    e(4038, 16, 1, "Cannot find file ID %d on device '%ls'."),
    e(4104, 16, 1, "The multi-part identifier \"%.*ls\" could not be bound."),
    e(4145, 15, 1, "An expression of non-boolean type specified in a context where a condition is expected, near '%.*ls'."),
    e(141, 15, 1, "A SELECT statement that assigns a value to a variable must not be combined with data-retrieval operations."),
    e(263, 16, 1, "Must specify table to select from."),
    e(911, 16, 1, "Database '%.*ls' does not exist. Make sure that the name is entered correctly."),
    e(945, 14, 2, "Database '%.*ls' cannot be opened due to inaccessible files or insufficient memory or disk space.  See the SQL Server errorlog for details."),
    e(942, 14, 4, "Database '%.*ls' cannot be opened because it is offline."),
    e(924, 14, 1, "Database '%.*ls' is already open and can only have one user at a time."),
    e(5061, 16, 1, "ALTER DATABASE failed because a lock could not be placed on database '%.*ls'. Try again later."),
    e(5058, 16, 6, "Option '%.*ls' cannot be set in database '%.*ls'."), // unverified state
    e(5069, 16, 1, "ALTER DATABASE statement failed."),
    e(5070, 16, 2, "Database state cannot be changed while other users are using the database '%.*ls'"),
    e(5060, 10, 1, "Nonqualified transactions are being rolled back. Estimated rollback completion: %d%%."),
    e(5052, 16, 1, "%ls is not permitted while a database is in the %ls state."),
    e(922, 14, 1, "Database '%.*ls' is being recovered. Waiting until recovery is finished."),
    e(926, 14, 1, "Database '%.*ls' cannot be opened. It has been marked SUSPECT by recovery. See the SQL Server errorlog for more information."),
    e(1101, 17, 1, "Could not allocate a new page for database '%.*ls' because of insufficient disk space in filegroup '%.*ls'. Create the necessary space by dropping objects in the filegroup, adding additional files to the filegroup, or setting autogrowth on for existing files in the filegroup."),
    e(1205, 13, 51, "Transaction (Process ID %d) was deadlocked on %.*ls resources with another process and has been chosen as the deadlock victim. Rerun the transaction."),
    e(4902, 16, 1, "Cannot find the object \"%.*ls\" because it does not exist or you do not have permissions."),
    e(1222, 16, 18, "Lock request time out period exceeded."),
    e(3952, 16, 1, "Snapshot isolation transaction failed accessing database '%.*ls' because snapshot isolation is not allowed in this database. Use ALTER DATABASE to allow snapshot isolation."),
    e(650, 16, 1, "You can only specify the READPAST lock in the READ COMMITTED or REPEATABLE READ isolation levels."),
    e(1067, 15, 1, "The SET SHOWPLAN statements must be the only statements in the batch."), // unverified state
    e(1065, 15, 1, "The NOLOCK and READUNCOMMITTED lock hints are not allowed for target tables of INSERT, UPDATE, DELETE or MERGE statements."),
    e(1105, 17, 2, "Could not allocate space for object '%.*ls'%.*ls in database '%.*ls' because the '%.*ls' filegroup is full. Create disk space by deleting unneeded files, dropping objects in the filegroup, adding additional files to the filegroup, or setting autogrowth on for existing files in the filegroup."),
    e(1801, 16, 3, "Database '%.*ls' already exists. Choose a different database name."),
    e(1802, 16, 4, "CREATE DATABASE failed. Some file names listed could not be created. Check related errors."),
    e(1803, 17, 1, "The CREATE DATABASE statement failed. The primary file must be at least %d MB to accommodate a copy of the model database."),
    e(1816, 16, 1, "Database snapshot on the system database %.*ls is not allowed."),
    e(1828, 16, 3, "The logical file name \"%.*ls\" is already in use. Choose a different name."),
    e(1830, 16, 1, "The files '%.*ls' and '%.*ls' are both primary files. A database can only have one primary file."),
    // The docs table shows one space after "overwritten."; SQL Server prints two. // unverified spacing
    e(1834, 16, 1, "The file '%ls' cannot be overwritten.  It is being used by database '%.*ls'."),
    e(1842, 16, 1, "The file size, max size cannot be greater than 2147483647 in units of a page size. The file growth cannot be greater than 2147483647 in units of both page size and percentage."),
    e(1922, 16, 1, "Filegroup '%.*ls' has no files assigned to it. Tables, indexes, and large object columns cannot be created on this filegroup. Use ALTER DATABASE to add one or more files to the filegroup."),
    e(1924, 16, 1, "Filegroup '%.*ls' is read-only."),
    e(2520, 16, 1, "Could not find database '%.*ls'. The database either does not exist, or was dropped before a statement tried to use it. Verify if the database exists by querying the sys.databases catalog view."),
    e(2536, 10, 1, "DBCC results for '%.*ls'."),
    e(2555, 16, 1, "Cannot move all contents of file \"%.*ls\" to other places to complete the emptyfile operation."),
    e(2526, 16, 3, "Incorrect DBCC statement. Check the documentation for the correct DBCC syntax and options."),
    e(2528, 10, 1, "DBCC execution completed. If DBCC printed error messages, contact your system administrator."),
    e(2537, 16, 1, "Table error: object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), page %S_PGID, row %d. The record check (%hs) failed. The values are %I64d and %I64d."), // unverified state
    e(2570, 16, 3, "Page %S_PGID, slot %d in object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type \"%.*ls\"). Column \"%.*ls\" value is out of range for data type \"%.*ls\". Update column to a legal value."),
    e(2601, 14, 1, "Cannot insert duplicate key row in object '%.*ls' with unique index '%.*ls'. The duplicate key value is %ls."),
    e(2627, 14, 1, "Violation of %ls constraint '%.*ls'. Cannot insert duplicate key in object '%.*ls'. The duplicate key value is %ls."),
    e(2628, 16, 1, "String or binary data would be truncated in table '%.*ls', column '%.*ls'. Truncated value: '%.*ls'."),
    e(2705, 16, 3, "Column names in each table must be unique. Column name '%.*ls' in table '%.*ls' is specified more than once."),
    e(2714, 16, 6, "There is already an object named '%.*ls' in the database."),
    e(547, 16, 0, "The %ls statement conflicted with the %ls constraint \"%.*ls\". The conflict occurred in database \"%.*ls\", table \"%.*ls\"%ls%.*ls%ls."),
    e(1046, 15, 1, "Subqueries are not allowed in this context. Only scalar expressions are allowed."),
    e(3727, 16, 0, "Could not drop constraint. See previous errors."),
    e(3728, 16, 1, "'%.*ls' is not a constraint."),
    e(8141, 16, 0, "Column CHECK constraint for column '%.*ls' references another column, table '%.*ls'."),
    e(2715, 16, 6, "Column, parameter, or variable #%d: Cannot find data type %.*ls."),
    e(2812, 16, 62, "Could not find stored procedure '%.*ls'."),
    e(3013, 16, 1, "%hs is terminating abnormally."),
    e(3183, 16, 1, "RESTORE detected an error on page (%d:%d) in database \"%ls\" as read from the backup set."),
    e(3241, 16, 0, "The media family on device '%ls' is incorrectly formed. SQL Server cannot process this media family."),
    e(3612, 0, 1, "%hs SQL Server Execution Times:%hs CPU time = %lu ms,  elapsed time = %lu ms."), // sys.messages severity 10, sent as 0 (MS-TDS 2.2.7.10: SQL Server turns 10 into 0); two spaces before "elapsed", as SQL Server sends it; unverified state
    e(3613, 0, 1, "SQL Server parse and compile time: %hs CPU time = %lu ms, elapsed time = %lu ms."), // severity as 3612's; unverified state
    e(3615, 0, 1, "Table '%.*ls'. Scan count %d, logical reads %d, physical reads %d, page server reads %d, read-ahead reads %d, page server read-ahead reads %d, lob logical reads %d, lob physical reads %d, lob page server reads %d, lob read-ahead reads %d, lob page server read-ahead reads %d."), // the SQL Server 2019+ text (page server counts added); sys.messages says severity 10, kept at 0 (unverified); unverified state
    e(3621, 10, 0, "The statement has been terminated."), // severity 10: clients print it as information, not as a Msg
    e(3623, 16, 1, "An invalid floating point operation occurred."),
    e(3701, 11, 5, "Cannot %S_MSG the %S_MSG '%.*ls', because it does not exist or you do not have permission."),
    e(3702, 16, 4, "Cannot drop database \"%.*ls\" because it is currently in use."),
    e(5009, 16, 1, "One or more files listed in the statement could not be found or could not be initialized."),
    e(5011, 14, 5, "User does not have permission to alter database '%.*ls', the database does not exist, or the database is not in a state that allows access checks."),
    e(5014, 16, 1, "The %S_MSG '%.*ls' does not exist in database '%.*ls'."),
    e(5020, 16, 1, "The primary data or log file cannot be removed from a database."),
    e(5031, 16, 1, "Cannot remove the file '%.*ls' because it is the only file in the DEFAULT filegroup."),
    e(5035, 16, 1, "Filegroup '%.*ls' already exists in this database. Specify a different name or remove the conflicting filegroup if it is empty."),
    e(5039, 16, 1, "MODIFY FILE failed. Specified size is less than or equal to current size."),
    e(5040, 16, 1, "MODIFY FILE failed. Size is greater than MAXSIZE."),
    e(8968, 16, 1, "Table error: %ls page %S_PGID (object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls)) is out of the range of this database."),
    e(8985, 16, 1, "Could not locate file '%.*ls' for database '%.*ls' in sys.database_files. The file either does not exist, or was dropped."),
    e(5041, 16, 1, "MODIFY FILE failed. File '%.*ls' does not exist."),
    e(5042, 16, 1, "The %S_MSG '%.*ls' cannot be removed because it is not empty."),
    e(5044, 10, 1, "The %S_MSG '%.*ls' has been removed."),
    e(5051, 16, 1, "Cannot have a filegroup with the name 'DEFAULT'."),
    e(5103, 16, 1, "MAXSIZE cannot be less than SIZE for file '%ls'."),
    e(5104, 16, 1, "File '%.*ls' already used."),
    e(5105, 16, 2, "A file activation error occurred. The physical file name '%.*ls' may be incorrect. Diagnose and correct additional errors, and retry the operation."),
    e(5120, 16, 101, "Unable to open the physical file \"%.*ls\". Operating system error %d: \"%ls\"."),
    e(5123, 16, 1, "CREATE FILE encountered operating system error %ls while attempting to open or create the physical file '%.*ls'."),
    e(5133, 16, 1, "Directory lookup for the file \"%ls\" failed with the operating system error %ls."),
    e(5149, 16, 3, "MODIFY FILE encountered operating system error %ls while attempting to expand the physical file '%ls'."),
    e(5169, 16, 1, "FILEGROWTH cannot be greater than MAXSIZE for file '%.*ls'."),
    e(5170, 16, 1, "Cannot create file '%ls' because it already exists. Change the file path or the file name, and retry the operation."),
    e(5172, 16, 15, "The header for file '%ls' is not a valid database file header. The %ls property is incorrect."),
    e(5173, 16, 1, "One or more files do not match the primary file of the database. If you are attempting to attach a database, retry the operation with the correct files. If this is an existing database, the file may be corrupted and should be restored from a backup."),
    e(5174, 16, 1, "Each file size must be greater than or equal to 512 KB."),
    // Level 0 on the wire (sqlcmd -m-1 prints "Msg 5701, Level 0, State 1"): pymssql
    // raises any message of severity 6 or more during connect as an error.
    e(5701, 0, 1, "Changed database context to '%.*ls'."),
    e(5703, 0, 1, "Changed language setting to %.*ls."),
    e(7995, 16, 1, "Database '%.*ls': consistency errors in system catalogs prevent further DBCC %ls processing."),
    e(8114, 16, 5, "Error converting data type %ls to %ls."),
    e(8115, 16, 2, "Arithmetic overflow error converting %ls to data type %ls."),
    e(8116, 16, 1, "Argument data type %ls is invalid for argument %d of %ls function."),
    e(8117, 16, 1, "Operand data type %ls is invalid for %ls operator."),
    e(8134, 16, 1, "Divide by zero error encountered."),
    e(8152, 16, 14, "String or binary data would be truncated."),
    e(8169, 16, 2, "Conversion failed when converting from a character string to uniqueidentifier."),
    e(8170, 16, 2, "Insufficient result space to convert uniqueidentifier value to char."),
    e(2501, 16, 45, "Cannot find a table or object with the name \"%.*ls\". Check the system catalog."),
    e(2511, 16, 2, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Keys out of order on page %S_PGID, slots %d and %d."),
    e(2512, 16, 2, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Duplicate keys on page %S_PGID slot %d and page %S_PGID slot %d."),
    e(2534, 16, 1, "Table error: page %S_PGID, whose header indicates that it is allocated to object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), is allocated by another object."),
    e(2575, 16, 1, "The Index Allocation Map (IAM) page %S_PGID is pointed to by the next pointer of IAM page %S_PGID in object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), but it was not detected in the scan."),
    e(2576, 16, 1, "The Index Allocation Map (IAM) page %S_PGID is pointed to by the previous pointer of IAM page %S_PGID in object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), but it was not detected in the scan."),
    e(2577, 16, 1, "Chain sequence numbers are out of order in the Index Allocation Map (IAM) chain for object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Page %S_PGID with sequence number %d points to page %S_PGID with sequence number %d."),
    e(2530, 16, 1, "The index \"%.*ls\" on table \"%.*ls\" is disabled."), // unverified state
    e(2591, 16, 1, "Cannot find a row in the system catalog with the index ID %d for table \"%.*ls\"."),
    e(2593, 10, 1, "There are %I64d rows in %I64d pages for object \"%.*ls\"."),
    e(7965, 16, 2, "Table error: Could not check object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls) due to invalid allocation (IAM) page(s)."),
    e(7919, 16, 3, "Repair statement not processed. Database needs to be in single user mode."),
    e(8927, 16, 1, "Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls): The ghosted record count in the header (%d) does not match the number of ghosted records (%d) found on page %S_PGID."),
    e(8928, 16, 1, "Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls): Page %S_PGID could not be processed.  See other errors for details."),
    e(8931, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls) B-tree level mismatch, page %S_PGID. Level %d does not match level %d from parent %S_PGID."),
    e(8933, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). The low key value on page %S_PGID (level %d) is not >= the key value in the parent %S_PGID slot %d."),
    e(8934, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). The high key value on page %S_PGID (level %d) is not less than the low key value in the parent %S_PGID, slot %d of the next page %S_PGID."),
    e(8935, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). The previous link %S_PGID on page %S_PGID does not match the previous page %S_PGID that the parent %S_PGID, slot %d expects for this page."),
    e(8937, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). B-tree page %S_PGID has two parent nodes %S_PGID, slot %d and %S_PGID, slot %d."),
    e(8941, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), page %S_PGID. Test (%hs) failed. Slot %d, offset 0x%x is invalid."),
    e(8942, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), page %S_PGID. Test (%hs) failed. Slot %d, offset 0x%x overlaps with the prior row."),
    e(8944, 16, 12, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), page %S_PGID, row %d. Test (%hs) failed. Values are %ld and %ld."),
    e(8948, 16, 6, "Database error: Page %S_PGID is marked with the wrong type in PFS page %S_PGID. PFS status 0x%x expected 0x%x."),
    e(8958, 10, 1, "%ls is the minimum repair level for the errors found by DBCC %ls (%ls%ls%ls)."),
    e(8976, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Page %S_PGID was not seen in the scan although its parent %S_PGID and previous %S_PGID refer to it. Check any previous errors."),
    e(8977, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Parent node for page %S_PGID was not encountered."),
    e(8978, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Page %S_PGID is missing a reference from previous page %S_PGID. Possible chain linkage problem."),
    e(8980, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). Index node page %S_PGID, slot %d refers to child page %S_PGID and previous child %S_PGID, but they were not encountered."),
    e(8981, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls). The next pointer of %S_PGID refers to page %S_PGID. Neither %S_PGID nor its parent were encountered. Possible bad chain linkage."),
    e(8992, 16, 1, "Check Catalog Msg %d, State %d: %.*ls"),
    e(8998, 16, 2, "Page errors on the GAM, SGAM, or PFS pages prevent allocation integrity checks in database ID %d pages from %S_PGID to %S_PGID. See other errors for cause."),
    e(8903, 16, 1, "Extent %S_PGID in database ID %d is allocated in both GAM %S_PGID and SGAM %S_PGID."),
    e(8904, 16, 1, "Extent %S_PGID in database ID %d is allocated by more than one allocation object."),
    e(8905, 16, 1, "Extent %S_PGID in database ID %d is marked allocated in the GAM, but no SGAM or IAM has allocated it."),
    e(8906, 16, 1, "Page %S_PGID in database ID %d is allocated in the SGAM %S_PGID and PFS %S_PGID, but was not allocated in any IAM. PFS flags '%hs'."),
    e(8909, 16, 1, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), page ID %S_PGID contains an incorrect page ID in its page header. The PageId in the page header = %S_PGID."),
    e(8913, 16, 1, "Extent %S_PGID is allocated to '%ls' and at least one other object."),
    e(8939, 16, 98, "Table error: Object ID %d, index ID %d, partition ID %I64d, alloc unit ID %I64d (type %.*ls), page %S_PGID. Test (%hs) failed. Values are %ld and %ld."),
    e(8946, 16, 12, "Table error: Allocation page %S_PGID has invalid %ls page header values. Type is %d. Check type, alloc unit ID and page ID on the page."),
    e(8989, 10, 1, "%.*ls found %d allocation errors and %d consistency errors in database '%ls'."),
    e(8990, 10, 1, "%.*ls found %d allocation errors and %d consistency errors in table '%ls' (object ID %d)."),
    e(9002, 17, 2, "The transaction log for database '%ls' is full due to '%ls'."), // the SQL Server 2017 text; unverified for 2022, whose text adds " and the holdup lsn is %S_LSN."
    e(9810, 16, 1, "The datepart %.*ls is not supported by date function %.*ls for data type %s."),
    e(15151, 16, 1, "Cannot %S_MSG the %S_MSG '%.*ls', because it does not exist or you do not have permission."),
    // Tables, DML and transactions.
    e(109, 15, 1, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement."),
    e(110, 15, 1, "There are fewer columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement."),
    e(145, 15, 1, "ORDER BY items must appear in the select list if SELECT DISTINCT is specified."),
    e(130, 16, 1, "Cannot perform an aggregate function on an expression containing an aggregate or a subquery."),
    e(147, 15, 1, "An aggregate may not appear in the WHERE clause unless it is in a subquery contained in a HAVING clause or a select list, and the column being aggregated is an outer reference."),
    e(264, 16, 1, "The column name '%.*ls' is specified more than once in the SET clause or column list of an INSERT. A column cannot be assigned more than one value in the same clause. Modify the clause to make sure that a column is updated only once. If this statement updates or inserts columns into a view, column aliasing can conceal the duplication in your code."),
    e(544, 16, 1, "Cannot insert explicit value for identity column in table '%.*ls' when IDENTITY_INSERT is set to OFF."),
    e(545, 16, 1, "Explicit value must be specified for identity column in table '%.*ls' either when IDENTITY_INSERT is set to ON or when a replication user is inserting into a NOT FOR REPLICATION identity column."),
    e(1023, 15, 1, "Invalid parameter %d specified for %ls."), // unverified state
    e(1088, 16, 11, "Cannot find the object \"%.*ls\" because it does not exist or you do not have permissions."), // unverified severity: sys.messages says 15; SQL Server is seen raising it at 16
    e(1701, 16, 1, "Creating or altering table '%.*ls' failed because the minimum row size would be %d, including %d bytes of internal overhead. This exceeds the maximum allowable table row size of %d bytes."),
    e(1750, 16, 0, "Could not create constraint or index. See previous errors."),
    e(271, 16, 1, "The column \"%.*ls\" cannot be modified because it is either a computed column or is the result of a UNION operator."),
    e(1759, 16, 0, "Computed column '%.*ls' in table '%.*ls' is not allowed to be used in another computed-column definition."),
    e(4936, 16, 1, "Computed column '%.*ls' in table '%.*ls' cannot be persisted because the column is non-deterministic."),
    e(2729, 16, 1, "Column '%.*ls' in %S_MSG '%.*ls' cannot be used in an index or statistics or as a partition key because it is non-deterministic."), // unverified state
    e(2799, 16, 1, "Cannot create index or statistics '%.*ls' on table '%.*ls' because the computed column '%.*ls' is imprecise and not persisted. Consider removing column from index or statistics key or marking computed column persisted."), // unverified state
    e(8183, 16, 1, "Only UNIQUE or PRIMARY KEY constraints can be created on computed columns, while CHECK, FOREIGN KEY, and NOT NULL constraints require that computed columns be persisted."),
    e(1761, 16, 0, "Cannot create the foreign key \"%.*ls\" with the SET NULL referential action, because one or more referencing columns are not nullable."),
    e(1762, 16, 0, "Cannot create the foreign key \"%.*ls\" with the SET DEFAULT referential action, because one or more referencing not-nullable columns lack a default constraint."),
    e(1766, 16, 0, "Foreign key references to temporary tables are not supported."),
    e(1767, 16, 0, "Foreign key '%.*ls' references invalid table '%.*ls'."),
    e(1769, 16, 1, "Foreign key '%.*ls' references invalid column '%.*ls' in referencing table '%.*ls'."),
    e(1770, 16, 0, "Foreign key '%.*ls' references invalid column '%.*ls' in referenced table '%.*ls'."),
    e(1776, 16, 0, "There are no primary or candidate keys in the referenced table '%.*ls' that match the referencing column list in the foreign key '%.*ls'."),
    e(1778, 16, 0, "Column '%.*ls.%.*ls' is not the same data type as referencing column '%.*ls.%.*ls' in foreign key '%.*ls'."),
    e(1785, 16, 0, "Introducing FOREIGN KEY constraint '%.*ls' on table '%.*ls' may cause cycles or multiple cascade paths. Specify ON DELETE NO ACTION or ON UPDATE NO ACTION, or modify other FOREIGN KEY constraints."),
    e(3726, 16, 1, "Could not drop object '%.*ls' because it is referenced by a FOREIGN KEY constraint."),
    e(4712, 16, 1, "Cannot truncate table '%.*ls' because it is being referenced by a FOREIGN KEY constraint."),
    e(8139, 16, 0, "Number of referencing columns in foreign key differs from number of referenced columns, table '%.*ls'."),
    e(1911, 16, 1, "Column name '%.*ls' does not exist in the target table or view."),
    e(8951, 16, 1, "Table error: table '%ls' (ID %d). Data row does not have a matching index row in the index '%ls' (ID %d). Possible missing or invalid keys for the index row matching:"), // unverified state
    e(8952, 16, 1, "Table error: table '%ls' (ID %d). Index row in index '%ls' (ID %d) does not match any data row. Possible extra or invalid keys for:"), // unverified state
    e(8955, 16, 1, "Data row (%d:%d:%d) identified by (%ls) with index values '%ls'."), // unverified state
    e(8956, 16, 1, "Index row (%d:%d:%d) with values (%ls) pointing to the data row identified by (%ls)."), // unverified state
    e(8986, 16, 1, "Too many errors found (%d) for object ID %d. To see all error messages rerun the statement using \"WITH ALL_ERRORMSGS\"."), // unverified state
    e(1505, 16, 1, "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name '%.*ls' and the index name '%.*ls'. The duplicate key value is %ls."),
    e(1902, 16, 3, "Cannot create more than one clustered index on %S_MSG '%.*ls'. Drop the existing clustered index '%.*ls' before creating another."), // unverified state
    e(1904, 16, 1, "The %S_MSG '%.*ls' on table '%.*ls' has %d columns in the key list. The maximum limit for %S_MSG key column list is %d."),
    e(1909, 16, 2, "Cannot use duplicate column names in %S_MSG. Column name '%.*ls' listed more than once."), // unverified state
    e(14138, 16, 1, "Invalid option name '%s'."), // unverified: sp_updatestats' @resample check
    e(1927, 16, 1, "There are already statistics on table '%.*ls' named '%.*ls'."),
    e(2706, 11, 6, "Table '%.*ls' does not exist."),
    e(2727, 11, 1, "Cannot find index '%.*ls'."),
    e(2767, 15, 1, "Could not locate statistics '%.*ls' in the system catalogs."),
    e(2583, 16, 1, "An incorrect number of parameters was given to the DBCC statement."),
    e(3739, 11, 1, "Cannot %ls the index '%.*ls' because it is not a statistics collection."),
    e(1913, 16, 1, "The operation failed because an index or statistics with name '%.*ls' already exists on table '%.*ls'."),
    e(1919, 16, 1, "Column '%.*ls' in table '%.*ls' is of a type that is invalid for use as a key column in an index."),
    e(1973, 16, 1, "Cannot perform the specified operation on disabled index '%.*ls' on %S_MSG '%.*ls'."), // unverified state
    e(1971, 16, 1, "Cannot disable index '%.*ls' on table '%.*ls'. Permission denied to disable foreign key '%.*ls' on table '%.*ls' that uses this index."), // unverified state
    e(1989, 16, 1, "Cannot enable foreign key constraint '%.*ls' as index '%.*ls' on referenced key is disabled."), // unverified state
    e(1992, 10, 1, "Warning: Foreign key '%.*ls' on table '%.*ls' referencing table '%.*ls' was disabled as a result of disabling the index '%.*ls'."),
    e(4916, 16, 0, "Could not enable or disable the constraint. See previous errors."), // unverified state
    e(4917, 16, 0, "Constraint '%.*ls' does not exist."), // unverified state
    e(11415, 16, 1, "Object '%.*ls' cannot be disabled or enabled. This action applies only to foreign key and check constraints."), // unverified state
    e(1944, 16, 1, "Index '%.*ls' was not created. This index has a key length of at least %d bytes. The maximum permissible key length is %d bytes."), // unverified: the SQL Server 2016+ text is "Index '%.*ls' was not created because the index key size is at least %d bytes. The %S_MSG index key size cannot exceed %d bytes. If the index key includes implicit key columns, the index key size cannot exceed %d bytes."
    e(3723, 16, 4, "An explicit DROP INDEX is not allowed on index '%.*ls'. It is being used for %ls constraint enforcement."), // unverified state
    e(1921, 16, 1, "Invalid filegroup '%.*ls' specified."),
    e(2744, 16, 2, "Multiple identity columns specified for table '%.*ls'. Only one identity column per table is allowed."),
    e(2749, 16, 2, "Identity column '%.*ls' must be of data type int, bigint, smallint, tinyint, or decimal or numeric with a scale of 0, and constrained to be nonnullable."),
    e(2760, 16, 1, "The specified schema name \"%.*ls\" either does not exist or you do not have permission to use it."),
    e(3902, 16, 1, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION."),
    e(3903, 16, 1, "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION."),
    e(4701, 16, 1, "Cannot find the object \"%.*ls\" because it does not exist or you do not have permissions."),
    e(8101, 16, 1, "An explicit value for the identity column in table '%.*ls' can only be specified when a column list is used and IDENTITY_INSERT is ON."),
    e(8102, 16, 1, "Cannot update identity column '%.*ls'."),
    e(8106, 16, 1, "Table '%.*ls' does not have the identity property. Cannot perform SET operation."),
    e(8107, 16, 1, "IDENTITY_INSERT is already ON for table '%.*ls.%.*ls.%.*ls'. Cannot perform SET operation for table '%.*ls'."),
    e(8110, 16, 0, "Cannot add multiple PRIMARY KEY constraints to table '%.*ls'."),
    e(8111, 16, 1, "Cannot define PRIMARY KEY constraint on nullable column in table '%.*ls'."),
    e(8160, 15, 1, "A GROUPING or GROUPING_ID function can only be specified when there is a GROUP BY clause."),
    e(8161, 15, 1, "Argument %d of the %.*ls function does not match any of the expressions in the GROUP BY clause."),
    e(10703, 15, 1, "The WITH CUBE and WITH ROLLUP options are not permitted with a ROLLUP, CUBE, or GROUPING SETS specification."),
    e(10705, 15, 1, "Too many grouping sets. The maximum number is %d."),
    e(10707, 15, 1, "Too many expressions are specified in the GROUP BY clause. The maximum number is %d when grouping sets are supplied."),
    e(8120, 16, 1, "Column '%.*ls' is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause."),
    e(8147, 16, 1, "Could not create IDENTITY attribute on nullable column '%.*ls', table '%.*ls'."),
    // System procedures.
    e(7999, 16, 9, "Could not find any index named '%.*ls' for table '%.*ls'."), // unverified state
    e(8144, 16, 2, "Procedure or function %.*ls has too many arguments specified."),
    e(8145, 16, 2, "%.*ls is not a parameter for procedure %.*ls."),
    e(15472, 10, 1, "The object '%ls' does not have any indexes, or you do not have permissions."),
    e(15197, 16, 1, "There is no text for object '%.*ls'."),
    e(15009, 16, 1, "The object '%s' does not exist in database '%s' or is invalid for this operation."),
    e(15010, 16, 1, "The database '%s' does not exist. Supply a valid database name. To see available databases, use sys.databases."),
    e(15250, 16, 1, "The database name component of the object qualifier must be the name of the current database."),
    e(15252, 16, 1, "The primary or foreign key table name must be given."),
    e(18456, 14, 1, "Login failed for user '%.*ls'.%.*ls%.*ls"),
    // Connections and remote procedure calls (TDS).
    e(4060, 11, 1, "Cannot open database \"%.*ls\" requested by the login. The login failed."),
    e(8178, 16, 1, "The parameterized query '%.*ls' expects the parameter '%.*ls', which was not supplied."),
    e(8179, 16, 4, "Could not find prepared statement with handle %d."),
    e(8645, 17, 1, "A timeout occurred while waiting for memory resources to execute the query in resource pool '%ls' (%ld). Rerun the query."),
    e(17053, 16, 1, "%ls: Operating system error %ls encountered."),
    e(17836, 20, 17, "Length specified in network packet payload did not match number of bytes read; the connection has been closed. Please contact the vendor of the client library.%.*ls"),
    e(18452, 14, 1, "Login failed. The login is from an untrusted domain and cannot be used with Integrated authentication.%.*ls"),
    e(6104, 16, 1, "Cannot use KILL to kill your own process."),
    // Logins.
    e(15025, 16, 2, "The server principal '%.*ls' already exists."),
    e(15118, 16, 1, "Password validation failed. The password does not meet the operating system policy requirements because it is not complex enough."),
    e(15247, 16, 1, "User does not have permission to perform this action."),
    e(15405, 11, 1, "Cannot use the special principal '%.*ls'."),
    e(15434, 16, 1, "Could not drop login '%.*ls' as the user is currently logged in."),
    e(6106, 16, 2, "Process ID %d is not an active process ID."),
    e(214, 16, 11, "Procedure expects parameter '%ls' of type '%ls'."), // unverified state
    e(13607, 16, 4, "JSON path is not properly formatted. Unexpected character '%lc' is found at position %d."), // unverified state
    e(13608, 16, 1, "Property cannot be found on the specified JSON path."),
    e(13609, 16, 4, "JSON text is not properly formatted. Unexpected character '%lc' is found at position %d."), // unverified state
    e(13611, 16, 1, "Value referenced by JSON path is not an array or object and cannot be opened with OPENJSON."),
    e(13623, 16, 1, "Scalar value cannot be found in the specified JSON path."),
    e(13624, 16, 1, "Object or array cannot be found in the specified JSON path."),
    e(13625, 16, 1, "String value in the specified JSON path would be truncated."),
    e(40517, 16, 1, "extentdb does not support %ls yet."),
];

/// Messages SQL Server writes to the ERRORLOG as well as sending them to the client
/// (sys.messages.is_event_logged, and every severity from 19 up): "Error: N, Severity: S,
/// State: T." then the text.
pub fn is_event_logged(e: &SqlError) -> bool {
    matches!(e.number, 701 | 823 | 824 | 1105 | 8630 | 9002 | 17053) || e.severity >= 19
}

/// The catalogue row for a number.
fn entry(number: i32) -> Option<&'static Entry> {
    CATALOGUE.iter().find(|e| e.number == number)
}

/// The `sys.messages` template of a number, for comparison with SQL Server's own table.
pub fn template(number: i32) -> Option<&'static str> {
    entry(number).map(|e| e.template)
}

/// The severity the catalogue gives a number (16 for unknown numbers).
pub fn severity(number: i32) -> u8 {
    entry(number).map_or(16, |e| e.severity)
}

/// Builds message `number` with its placeholders filled by `args` in order.
pub fn msg(number: i32, args: &[&dyn fmt::Display]) -> SqlError {
    let (severity, state, text) = match entry(number) {
        Some(e) => (e.severity, e.state, fill(e.template, args)),
        None => {
            let list: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            (16, 1, format!("Message {number} ({})", list.join(", ")))
        }
    };
    SqlError {
        number,
        severity,
        state,
        text,
        line: 0,
        procedure: None,
    }
}

/// Like [`msg`] with owned strings, for callers that build arguments dynamically.
pub fn msg_strings(number: i32, args: &[String]) -> SqlError {
    let refs: Vec<&dyn fmt::Display> = args.iter().map(|s| s as &dyn fmt::Display).collect();
    msg(number, &refs)
}

/// Fills a printf-style template. Every conversion (`%d`, `%ls`, `%.*ls`, `%I64d`,
/// `%S_MSG`, `%S_PGID`, `%#016I64x` ...) takes one argument, already formatted by the
/// caller; `%%` is a percent sign; a missing argument prints `(null)` as RAISERROR does.
pub fn fill(template: &str, args: &[&dyn fmt::Display]) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut next = args.iter();
    let mut rest = template;
    while let Some(pos) = rest.find('%') {
        out.push_str(&rest[..pos]);
        let spec = &rest[pos + 1..];
        if let Some(after) = spec.strip_prefix('%') {
            out.push('%');
            rest = after;
            continue;
        }
        let (len, width, left) = conversion_length(spec);
        if len == 0 {
            // A lone '%' at the end or before an unknown character stays literal.
            out.push('%');
            rest = spec;
            continue;
        }
        let value = next
            .next()
            .map_or_else(|| "(null)".to_string(), |a| a.to_string());
        pad_into(&mut out, &value, width, left);
        rest = &spec[len..];
    }
    out.push_str(rest);
    out
}

/// Length in bytes of the conversion after '%' (0 when it is not one), its minimum width
/// (only honoured for `%-30ls` style left-justified text) and whether it is left-justified.
fn conversion_length(spec: &str) -> (usize, usize, bool) {
    let b = spec.as_bytes();
    let mut i = 0;
    let mut left = false;
    while i < b.len() && matches!(b[i], b'-' | b'#' | b'0' | b'+' | b' ') {
        left |= b[i] == b'-';
        i += 1;
    }
    let width_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let width = spec[width_start..i].parse().unwrap_or(0);
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if i < b.len() && b[i] == b'*' {
            i += 1;
        }
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if spec[i..].starts_with("S_") {
        let name_len = spec[i + 2..]
            .bytes()
            .take_while(|c| c.is_ascii_uppercase() || *c == b'_')
            .count();
        return (i + 2 + name_len, width, left);
    }
    if spec[i..].starts_with("I64") {
        i += 3;
    }
    while i < b.len() && matches!(b[i], b'h' | b'l') {
        i += 1;
    }
    match b.get(i) {
        Some(b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b's' | b'f' | b'c' | b'p' | b'g' | b'e') => {
            (i + 1, width, left)
        }
        _ => (0, 0, false),
    }
}

fn pad_into(out: &mut String, value: &str, width: usize, left: bool) {
    let n = value.chars().count();
    if n >= width {
        out.push_str(value);
    } else if left {
        out.push_str(value);
        out.push_str(&" ".repeat(width - n));
    } else {
        out.push_str(&" ".repeat(width - n));
        out.push_str(value);
    }
}

/// SQL Server's rendering of an operating-system error inside messages 5123, 5149, 823:
/// the Windows error number and text, e.g. `5(Access is denied.)`, mapped from a Linux
/// errno. Errors without a Windows counterpart keep their errno and strerror text.
pub fn os_error_text(errno: i32) -> String {
    let windows = match errno {
        libc::EACCES | libc::EPERM | libc::EROFS => Some((5, "Access is denied.")),
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => {
            Some((112, "There is not enough space on the disk."))
        }
        libc::ENOENT => Some((2, "The system cannot find the file specified.")),
        libc::ENOTDIR => Some((3, "The system cannot find the path specified.")),
        libc::EEXIST => Some((80, "The file exists.")),
        libc::EBUSY | libc::ETXTBSY => Some((
            32,
            "The process cannot access the file because it is being used by another process.",
        )),
        _ => None,
    };
    match windows {
        Some((n, text)) => format!("{n}({text})"),
        None => format!("{errno}({})", strerror(errno)),
    }
}

/// The C library's text for an errno, without Rust's " (os error N)" suffix.
fn strerror(errno: i32) -> String {
    let full = std::io::Error::from_raw_os_error(errno).to_string();
    match full.rfind(" (os error ") {
        Some(pos) => full[..pos].to_string(),
        None => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_ls_placeholder_with_path() {
        let e = msg(5170, &[&"/data/db1.mdf"]);
        assert_eq!(e.number, 5170);
        assert_eq!(e.severity, 16);
        assert_eq!(e.state, 1);
        assert_eq!(
            e.text,
            "Cannot create file '/data/db1.mdf' because it already exists. Change the file path or the file name, and retry the operation."
        );
    }

    #[test]
    fn fills_precision_star_placeholder() {
        let e = msg(137, &[&"@x"]);
        assert_eq!(e.text, "Must declare the scalar variable \"@x\".");
        assert_eq!((e.severity, e.state), (15, 2));
    }

    #[test]
    fn fills_numbers_in_order() {
        let e = msg(8989, &[&"CHECKDB", &0, &2, &"db1"]);
        assert_eq!(
            e.text,
            "CHECKDB found 0 allocation errors and 2 consistency errors in database 'db1'."
        );
        assert!(e.is_info());
    }

    #[test]
    fn fills_special_placeholders() {
        let e = msg(8946, &[&"(1:2)", &"GAM", &8]);
        assert!(e.text.starts_with(
            "Table error: Allocation page (1:2) has invalid GAM page header values. Type is 8."
        ));
        let e = msg(
            824,
            &[
                &"x",
                &"read",
                &"(1:9)",
                &5,
                &"0x0000000000012000",
                &"/f.mdf",
            ],
        );
        assert!(e.text.contains("during a read of page (1:9) in database ID 5 at offset 0x0000000000012000 in file '/f.mdf'."));
        let e = msg(220, &[&"tinyint", &300]);
        assert_eq!(
            e.text,
            "Arithmetic overflow error for data type tinyint, value = 300."
        );
    }

    #[test]
    fn missing_argument_and_percent() {
        assert_eq!(fill("a %d b %% c", &[]), "a (null) b % c");
        assert_eq!(fill("%-5ls|", &[&"ab"]), "ab   |");
        assert_eq!(fill("100%", &[]), "100%");
    }

    #[test]
    fn with_state_and_unknown_number() {
        let e = msg(2714, &[&"t"]).with_state(5);
        assert_eq!(e.state, 5);
        assert_eq!(
            e.text,
            "There is already an object named 't' in the database."
        );
        let u = msg(99999, &[&"a"]);
        assert_eq!(u.severity, 16);
    }

    #[test]
    fn messages_without_arguments() {
        assert_eq!(msg(8134, &[]).text, "Divide by zero error encountered.");
        assert_eq!(msg(3621, &[]).text, "The statement has been terminated.");
        assert_eq!(msg(2528, &[]).severity, 10);
        assert_eq!(
            msg(2812, &[&"sp_x"]).text,
            "Could not find stored procedure 'sp_x'."
        );
    }

    /// Proves the rows corrected to Microsoft's tables fill as SQL Server prints them: the
    /// %S_MSG and %hs slots the callers now fill, the renumbered MERGE messages, and the
    /// documented severities.
    #[test]
    fn documented_templates_fill() {
        let e = msg(1904, &[&"index", &"ix", &"dbo.t", &33, &"index", &32]);
        assert_eq!(
            e.text,
            "The index 'ix' on table 'dbo.t' has 33 columns in the key list. The maximum limit for index key column list is 32."
        );
        assert_eq!(
            msg(1909, &[&"index", &"a"]).text,
            "Cannot use duplicate column names in index. Column name 'a' listed more than once."
        );
        assert!(msg(4208, &[&"BACKUP LOG"]).text.starts_with(
            "The statement BACKUP LOG is not allowed while the recovery model is SIMPLE."
        ));
        assert_eq!(
            msg(5052, &[&"ALTER DATABASE", &"RESTORING"]).text,
            "ALTER DATABASE is not permitted while a database is in the RESTORING state."
        );
        assert_eq!(
            msg(402, &[&"int", &"date", &"add"]).text,
            "The data types int and date are incompatible in the add operator."
        );
        assert!(msg(5333, &[&"t.id"])
            .text
            .contains("'WHEN NOT MATCHED' clause"));
        assert!(msg(5334, &[&"s.v"])
            .text
            .contains("'WHEN NOT MATCHED BY SOURCE' clause"));
        assert!(template(5332).is_none());
        assert_eq!(
            (severity(10742), severity(10744), severity(1062)),
            (15, 15, 16)
        );
    }

    #[test]
    fn catalogue_numbers_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for e in CATALOGUE {
            assert!(seen.insert(e.number), "duplicate {}", e.number);
        }
    }

    #[test]
    fn os_errors_in_windows_form() {
        assert_eq!(os_error_text(libc::EACCES), "5(Access is denied.)");
        assert_eq!(
            os_error_text(libc::ENOSPC),
            "112(There is not enough space on the disk.)"
        );
        assert_eq!(
            os_error_text(libc::ENOENT),
            "2(The system cannot find the file specified.)"
        );
        assert_eq!(
            os_error_text(libc::ENOTDIR),
            "3(The system cannot find the path specified.)"
        );
        assert_eq!(os_error_text(libc::EEXIST), "80(The file exists.)");
        let other = os_error_text(libc::EIO);
        assert!(other.starts_with(&format!("{}(", libc::EIO)) && other.ends_with(')'));
        assert!(!other.contains("os error"));
        let e = msg(5123, &[&os_error_text(libc::EACCES), &"/x/y.mdf"]);
        assert_eq!(
            e.text,
            "CREATE FILE encountered operating system error 5(Access is denied.) while attempting to open or create the physical file '/x/y.mdf'."
        );
    }
}
