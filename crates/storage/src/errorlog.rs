//! The SQL Server-style error log: DIR/log/ERRORLOG, rolled to ERRORLOG.1 ... ERRORLOG.6.
//!
//! Line shape (seed 004): `yyyy-mm-dd hh:mm:ss.ff <source padded to 12> <text>`, local time.
//! Lines are appended with O_APPEND so concurrent writers never interleave inside a line.
//!
//! Invariant: at most `ARCHIVES` archives exist; cycling drops the oldest.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Archived logs kept besides the current one (ERRORLOG.1 ... ERRORLOG.6).
pub const ARCHIVES: u32 = 6;

pub struct ErrorLog {
    dir: PathBuf,
    file: Mutex<File>,
    /// Keys of messages written once per process (`write_once`).
    once: Mutex<std::collections::HashSet<String>>,
}

/// One parsed line, as xp_readerrorlog returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `yyyy-mm-dd hh:mm:ss.ff`
    pub date: String,
    pub source: String,
    pub text: String,
}

impl ErrorLog {
    /// Opens (creating) DIR/ERRORLOG for appending.
    pub fn open(dir: &Path) -> std::io::Result<ErrorLog> {
        crate::instance_lock::create_private_dir(dir)?;
        let file = open_append(&dir.join("ERRORLOG"))?;
        Ok(ErrorLog {
            dir: dir.to_path_buf(),
            file: Mutex::new(file),
            once: Default::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one line per line of `text`, all with the same timestamp and source.
    /// Failing to write the error log must not fail the operation being logged.
    pub fn write(&self, source: &str, text: &str) {
        let stamp = local_timestamp();
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&format!("{stamp} {source:<12} {line}\n"));
        }
        let mut f = self.file.lock().unwrap();
        let _ = f.write_all(out.as_bytes());
    }

    /// Writes `text` unless a message with `key` was written before by this process.
    pub fn write_once(&self, key: &str, source: &str, text: &str) {
        if self.once.lock().unwrap().insert(key.to_string()) {
            self.write(source, text);
        }
    }

    /// sp_cycle_errorlog: ERRORLOG.5 -> .6, ..., ERRORLOG -> .1, and a new ERRORLOG.
    pub fn cycle(&self) -> std::io::Result<()> {
        let mut f = self.file.lock().unwrap();
        for n in (1..ARCHIVES).rev() {
            let from = self.dir.join(format!("ERRORLOG.{n}"));
            if from.exists() {
                std::fs::rename(&from, self.dir.join(format!("ERRORLOG.{}", n + 1)))?;
            }
        }
        std::fs::rename(self.dir.join("ERRORLOG"), self.dir.join("ERRORLOG.1"))?;
        *f = open_append(&self.dir.join("ERRORLOG"))?;
        Ok(())
    }

    /// Reads log `archive` (0 = current) as xp_readerrorlog does. Lines that do not start
    /// with a timestamp continue the previous line's text.
    pub fn read(&self, archive: u32) -> std::io::Result<Vec<LogLine>> {
        let name = if archive == 0 {
            "ERRORLOG".to_string()
        } else {
            format!("ERRORLOG.{archive}")
        };
        let text = std::fs::read_to_string(self.dir.join(name))?;
        Ok(parse(&text))
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Parses error log text into lines.
pub fn parse(text: &str) -> Vec<LogLine> {
    let mut out: Vec<LogLine> = Vec::new();
    for line in text.lines() {
        let stamp = line.get(..22).filter(|s| is_timestamp(s));
        if let (Some(stamp), Some(rest)) = (stamp, line.get(23..)) {
            let (source, text) = match rest.get(..12) {
                Some(s) => (
                    s.trim_end().to_string(),
                    rest.get(13..).unwrap_or("").to_string(),
                ),
                None => (rest.trim_end().to_string(), String::new()),
            };
            out.push(LogLine {
                date: stamp.to_string(),
                source,
                text,
            });
        } else if let Some(last) = out.last_mut() {
            last.text.push('\n');
            last.text.push_str(line);
        }
    }
    out
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 22
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b' '
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19].contains(&i) || c.is_ascii_digit())
}

/// The current local time as `yyyy-mm-dd hh:mm:ss.ff`.
pub fn local_timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let t = local_time(now.as_micros() as i64);
    t[..t.len() - 1].to_string()
}

/// A time in microseconds since the Unix epoch as local `yyyy-mm-dd hh:mm:ss.fff`.
pub fn local_time(unix_us: i64) -> String {
    let secs = unix_us.div_euclid(1_000_000) as libc::time_t;
    let millis = unix_us.rem_euclid(1_000_000) / 1000;
    // SAFETY: localtime_r writes into the tm we own and reads only `secs`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        millis
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves lines round-trip through write and read, and cycling keeps six archives.
    #[test]
    fn write_read_cycle() {
        let dir = std::env::temp_dir().join(format!("xdb-errlog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = ErrorLog::open(&dir).unwrap();
        log.write(
            "spid51",
            "Proportional Fill Recalculation Starting for DB Company with m_cAllocs 8192.",
        );
        let lines = log.read(0).unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].source, "spid51");
        assert!(lines[0].text.starts_with("Proportional Fill"));
        for i in 0..8 {
            log.write("Server", &format!("cycle {i}"));
            log.cycle().unwrap();
        }
        assert!(dir.join("ERRORLOG.6").exists());
        assert!(!dir.join("ERRORLOG.7").exists());
        assert_eq!(log.read(1).unwrap()[0].text, "cycle 7");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
