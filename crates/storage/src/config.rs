//! The instance configuration file, DIR/instance.conf: `key = value` lines, `#` comments.
//! Written by `extentdb setup`, read at every start.

use std::path::{Path, PathBuf};

use crate::StorageError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceConfig {
    /// Instant file initialization for data files.
    pub instant_file_init: bool,
    /// The only directories where CREATE/ALTER DATABASE may put files; the first is the
    /// default for files named without a directory.
    pub data_roots: Vec<PathBuf>,
    pub tempdb_files: u32,
    pub tempdb_file_size_pages: u32,
    /// `pbkdf2-sha256$<iterations>$<salt hex>$<hash hex>`; empty when no password was set.
    pub sa_password_hash: String,
    /// The buffer pools' memory cap for all databases together ('max server memory (MB)').
    pub max_server_memory_mb: u32,
    /// The only directories BACKUP may write and RESTORE may read; the first is the default
    /// for backup files named without a directory (SQL Server's default backup directory).
    pub backup_roots: Vec<PathBuf>,
}

impl InstanceConfig {
    pub fn defaults(dir: &Path) -> InstanceConfig {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        InstanceConfig {
            instant_file_init: true,
            data_roots: vec![dir.join("data")],
            tempdb_files: cores.min(8),
            tempdb_file_size_pages: 1024,
            sa_password_hash: String::new(),
            max_server_memory_mb: 1024,
            backup_roots: vec![dir.join("backup")],
        }
    }

    pub fn render(&self) -> String {
        let mut s =
            String::from("# extentdb instance configuration, written by `extentdb setup`.\n");
        s.push_str(&format!(
            "instant_file_init = {}\n",
            if self.instant_file_init { "on" } else { "off" }
        ));
        for r in &self.data_roots {
            s.push_str(&format!("data_root = {}\n", r.display()));
        }
        s.push_str(&format!("tempdb_files = {}\n", self.tempdb_files));
        s.push_str(&format!(
            "tempdb_file_size_pages = {}\n",
            self.tempdb_file_size_pages
        ));
        s.push_str(&format!("sa_password_hash = {}\n", self.sa_password_hash));
        s.push_str(&format!(
            "max_server_memory_mb = {}\n",
            self.max_server_memory_mb
        ));
        for r in &self.backup_roots {
            s.push_str(&format!("backup_root = {}\n", r.display()));
        }
        s
    }

    pub fn parse(dir: &Path, text: &str) -> Result<InstanceConfig, StorageError> {
        let bad = |line: &str| {
            StorageError::Instance(
                dir.to_path_buf(),
                format!("instance.conf: cannot read line '{line}'"),
            )
        };
        let mut c = InstanceConfig::defaults(dir);
        c.data_roots.clear();
        c.backup_roots.clear();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (k, v) = line.split_once('=').ok_or_else(|| bad(line))?;
            let v = v.trim();
            match k.trim() {
                "instant_file_init" => {
                    c.instant_file_init = parse_on_off(v).ok_or_else(|| bad(line))?
                }
                "data_root" => c.data_roots.push(PathBuf::from(v)),
                "backup_root" => c.backup_roots.push(PathBuf::from(v)),
                "tempdb_files" => c.tempdb_files = v.parse().map_err(|_| bad(line))?,
                "tempdb_file_size_pages" => {
                    c.tempdb_file_size_pages = v.parse().map_err(|_| bad(line))?
                }
                "sa_password_hash" => c.sa_password_hash = v.to_string(),
                "max_server_memory_mb" => {
                    c.max_server_memory_mb = v.parse().map_err(|_| bad(line))?
                }
                _ => return Err(bad(line)),
            }
        }
        if c.data_roots.is_empty() {
            c.data_roots.push(dir.join("data"));
        }
        if c.backup_roots.is_empty() {
            c.backup_roots.push(dir.join("backup"));
        }
        Ok(c)
    }
}

pub fn parse_on_off(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Some(true),
        "off" | "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// Hashes a password with PBKDF2-HMAC-SHA256 and a random 16-byte salt.
pub fn hash_password(password: &str) -> String {
    let mut salt = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut salt);
    }
    let iterations = 100_000;
    let hash =
        pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(password.as_bytes(), &salt, iterations);
    format!("pbkdf2-sha256${iterations}${}${}", hex(&salt), hex(&hash))
}

/// Checks a password against a stored hash in constant time over the hash bytes.
pub fn verify_password(password: &str, stored: &str) -> bool {
    let parts: Vec<&str> = stored.split('$').collect();
    let [scheme, iterations, salt, hash] = parts[..] else {
        return false;
    };
    let (Ok(iterations), Some(salt), Some(hash)) =
        (iterations.parse::<u32>(), unhex(salt), unhex(hash))
    else {
        return false;
    };
    if scheme != "pbkdf2-sha256" || hash.len() != 32 {
        return false;
    }
    let got = pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(password.as_bytes(), &salt, iterations);
    got.iter().zip(&hash).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}
