//! `extentdb inspect`: DBCC PAGE on the files of a stopped instance. The files are read
//! directly (the instance is not started, nothing is recovered or written); the text is
//! DBCC PAGE's (`extentdb_sql::dbcc_page`), printed to standard output. An index page at
//! printopt 3 prints its header's text and then its rows as the statement's result set
//! gives them (`format_index_page`), as a table in sqlcmd's layout
//! (`extentdb_sql::render::render_result_set`).

use std::path::{Path, PathBuf};

use clap::Args;
use extentdb_format::{PageId, PageNo};
use extentdb_io::FileSystem;
use extentdb_sql::dbcc_page;
use extentdb_sql::messages::msg;
use extentdb_storage::config::InstanceConfig;
use extentdb_storage::database::open_offline;
use extentdb_storage::{Instance, StorageError};

#[derive(Args)]
pub struct InspectArgs {
    /// The instance's directory.
    #[arg(long)]
    data_dir: PathBuf,
    /// The database (as sys.databases names it).
    #[arg(long)]
    database: String,
    /// The file id (1 is the primary data file).
    #[arg(long)]
    file: u16,
    /// The page number within the file.
    #[arg(long)]
    page: u32,
    /// DBCC PAGE's print option: 0 header, 1 records, 2 whole page, 3 records and columns
    /// (an index page's rows as a table).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=3))]
    printopt: u8,
}

/// The databases of a stopped instance as its master lists them: (id, name, primary file),
/// master first; tempdb (recreated at every start) is left out.
pub(crate) fn offline_databases(
    data_dir: &Path,
    fs: &dyn FileSystem,
) -> Result<Vec<(u16, String, PathBuf)>, String> {
    let text = std::fs::read_to_string(Instance::config_path(data_dir))
        .map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let config = InstanceConfig::parse(data_dir, &text).map_err(|e| e.to_string())?;
    let master_path = config.data_roots[0].join("master.mdf");
    let master = open_offline(fs, &master_path).map_err(|e| e.to_string())?;
    let mut all = vec![(
        master.catalog.database_id,
        "master".to_string(),
        master_path,
    )];
    all.extend(
        master
            .catalog
            .databases
            .iter()
            .filter(|d| !d.name.eq_ignore_ascii_case("tempdb"))
            .map(|d| {
                (
                    d.database_id,
                    d.name.clone(),
                    PathBuf::from(&d.primary_file),
                )
            }),
    );
    Ok(all)
}

/// The instance's lock for an offline tool (instance_lock.rs): the files of a running
/// server are refused, not read half-written. None when there is no instance to lock
/// (`offline_databases` then says so).
pub fn lock_offline(
    dir: &Path,
) -> Result<Option<extentdb_storage::instance_lock::InstanceLock>, String> {
    if !Instance::exists(dir) {
        return Ok(None);
    }
    extentdb_storage::instance_lock::InstanceLock::acquire(dir)
        .map(Some)
        .map_err(|e| e.to_string())
}

pub fn run(a: InspectArgs, fs: &dyn FileSystem) -> Result<u8, String> {
    let _lock = lock_offline(&a.data_dir)?;
    let (db_id, _, primary) = offline_databases(&a.data_dir, fs)?
        .into_iter()
        .find(|(_, n, _)| n.eq_ignore_ascii_case(&a.database))
        .ok_or_else(|| msg(2520, &[&a.database]).text)?;
    let db = open_offline(fs, Path::new(&primary)).map_err(|e| e.to_string())?;
    let pid = PageId::new(a.file, a.page);
    let read = |at: PageId| -> Result<extentdb_format::Page, StorageError> {
        let f = db
            .data_files
            .get(&at.file.0)
            .ok_or_else(|| StorageError::FileNotFound(at.file.0.to_string()))?;
        f.read_page_raw(PageNo(at.page.0))
    };
    let page = match read(pid) {
        Ok(p) => p,
        Err(StorageError::PageOutOfRange { .. } | StorageError::FileNotFound(_)) => {
            let e = msg(8968, &[&"DBCC PAGE", &pid, &0, &-1, &0, &0, &"Unknown"]);
            eprintln!(
                "Msg {}, Level {}, State {}\n{}",
                e.number, e.severity, e.state, e.text
            );
            return Ok(1);
        }
        Err(e) => return Err(e.to_string()),
    };
    let maps = dbcc_page::read_maps(pid, |at| read(at).ok());
    let au = page.raw_header().allocation_unit_id;
    // A record holds the stored columns only (a computed column not PERSISTED is not).
    let stored = db
        .catalog
        .tables
        .iter()
        .find(|t| t.allocation_unit_id == au)
        .map(extentdb_storage::table::stored_entry);
    let ctx = dbcc_page::PageContext {
        database_id: db_id,
        dirty: false,
        maps,
        table: stored.as_ref(),
    };
    let (lines, grid) = match dbcc_page::format_index_page(pid, &page, a.printopt, &ctx) {
        Some((lines, grid)) => (lines, Some(grid)),
        None => (dbcc_page::format_page(pid, &page, a.printopt, &ctx), None),
    };
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    if let Some((columns, rows)) = grid {
        out.push_str(&extentdb_sql::render::render_result_set(&columns, &rows));
    }
    print!("{out}");
    Ok(0)
}
