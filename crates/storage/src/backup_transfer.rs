//! How a backup's bytes reach its file: BACKUP's BUFFERCOUNT and MAXTRANSFERSIZE.
//!
//! The backup reads the database and encodes blocks into buffers of MAXTRANSFERSIZE bytes;
//! a writer thread writes each full buffer to the file with one `write_all` while the next
//! is filled. At most BUFFERCOUNT buffers exist at once (the one being filled and those
//! queued or being written), so a backup's buffer memory is BUFFERCOUNT x MAXTRANSFERSIZE
//! whatever the database's size. SQL Server's defaults for a disk are a 1 MB transfer; its
//! buffer count depends on the devices and files, ours is `DEFAULT_BUFFER_COUNT`.
//!
//! Invariants:
//! 1. Bytes reach the file in the order they were written here: one writer thread, one
//!    FIFO queue, and every buffer but the last is exactly MAXTRANSFERSIZE bytes.
//! 2. No more than `buffer_count` buffers are ever allocated (`Transfer::allocated`):
//!    a full buffer waits for a free one to come back from the writer.
//! 3. A write error stops the writer; the next `write` or `finish` returns it, and
//!    nothing written after it reaches the file.

use std::fs::File;
use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// SQL Server's MAXTRANSFERSIZE bounds: multiples of 64 KB from 64 KB to 4 MB.
pub const MIN_TRANSFER: u32 = 64 << 10;
pub const MAX_TRANSFER: u32 = 4 << 20;
/// The default transfer size for a disk device (1 MB), as SQL Server's.
pub const DEFAULT_TRANSFER: u32 = 1 << 20;
/// Buffers when BUFFERCOUNT is not given: one being filled, one being written, two queued.
pub const DEFAULT_BUFFER_COUNT: u32 = 4;

/// BUFFERCOUNT and MAXTRANSFERSIZE of one backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferSettings {
    pub buffer_count: u32,
    pub max_transfer: u32,
}

impl Default for TransferSettings {
    fn default() -> TransferSettings {
        TransferSettings {
            buffer_count: DEFAULT_BUFFER_COUNT,
            max_transfer: DEFAULT_TRANSFER,
        }
    }
}

impl TransferSettings {
    /// The buffer memory a backup with these settings holds at most.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer_count as u64 * self.max_transfer as u64
    }
}

/// The writing side of a backup file (a `Write`); `finish` hands the file back.
pub struct Transfer {
    settings: TransferSettings,
    filling: Vec<u8>,
    /// Full buffers to the writer; empty ones come back on `free`.
    full: Option<SyncSender<Vec<u8>>>,
    free: Receiver<Vec<u8>>,
    writer: Option<JoinHandle<(File, std::io::Result<()>)>>,
    /// Buffers allocated so far (invariant 2).
    allocated: u32,
}

impl Transfer {
    /// Starts the writer thread on `file`, positioned where the bytes go.
    pub fn start(file: File, settings: TransferSettings) -> std::io::Result<Transfer> {
        assert!(
            settings.buffer_count >= 1 && settings.max_transfer >= MIN_TRANSFER,
            "a buffer to fill"
        );
        let (full_tx, full_rx) = sync_channel::<Vec<u8>>(settings.buffer_count as usize);
        let (free_tx, free_rx) = sync_channel::<Vec<u8>>(settings.buffer_count as usize);
        let writer = std::thread::Builder::new()
            .name("backup-writer".into())
            .spawn(move || write_buffers(file, full_rx, free_tx))?;
        Ok(Transfer {
            settings,
            filling: Vec::with_capacity(settings.max_transfer as usize),
            full: Some(full_tx),
            free: free_rx,
            writer: Some(writer),
            allocated: 1,
        })
    }

    /// Hands the full buffer to the writer, then takes an empty one: a new allocation while
    /// fewer than `buffer_count` exist, else the next one the writer gives back (with
    /// BUFFERCOUNT = 1, the one just written: no overlap).
    fn hand_over(&mut self) -> std::io::Result<()> {
        let full = std::mem::take(&mut self.filling);
        let sent = self.full.as_ref().map(|tx| tx.send(full));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.writer_failed());
        }
        self.filling = match self.free.try_recv() {
            Ok(b) => b,
            Err(_) if self.allocated < self.settings.buffer_count => {
                self.allocated += 1;
                Vec::with_capacity(self.settings.max_transfer as usize)
            }
            Err(_) => match self.free.recv() {
                Ok(b) => b,
                Err(_) => return Err(self.writer_failed()),
            },
        };
        Ok(())
    }

    /// The writer's error once it has stopped (invariant 3).
    fn writer_failed(&mut self) -> std::io::Error {
        self.full = None;
        match self.writer.take().map(|w| w.join()) {
            Some(Ok((_, Err(e)))) => e,
            _ => std::io::Error::other("the backup writer stopped"),
        }
    }

    /// Writes what is left, stops the writer and returns the file with the first write
    /// error, if any. The file is not synced here.
    pub fn finish(mut self) -> (Option<File>, std::io::Result<()>) {
        let last = std::mem::take(&mut self.filling);
        if let Some(tx) = self.full.take() {
            // A failed send means the writer stopped; its error is returned below.
            let _ = tx.send(last);
        }
        match self.writer.take().map(|w| w.join()) {
            Some(Ok((f, r))) => (Some(f), r),
            _ => (
                None,
                Err(std::io::Error::other("the backup writer stopped")),
            ),
        }
    }
}

impl Write for Transfer {
    fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<usize> {
        let n = bytes.len();
        let max = self.settings.max_transfer as usize;
        while !bytes.is_empty() {
            let take = (max - self.filling.len()).min(bytes.len());
            self.filling.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.filling.len() == max {
                self.hand_over()?;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Transfer {
    fn drop(&mut self) {
        self.full = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// The writer thread: each buffer in order, with one write (invariant 1), then back to
/// the filler; the first error ends it (invariant 3).
fn write_buffers(
    mut file: File,
    full: Receiver<Vec<u8>>,
    free: SyncSender<Vec<u8>>,
) -> (File, std::io::Result<()>) {
    while let Ok(mut b) = full.recv() {
        if let Err(e) = file.write_all(&b) {
            return (file, Err(e));
        }
        b.clear();
        // The filler may have finished and gone: the buffer is then dropped.
        let _ = free.try_send(b);
    }
    (file, Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    /// Proves bytes arrive in order across buffer boundaries, the buffers allocated never
    /// exceed BUFFERCOUNT, and the file comes back positioned after them.
    #[test]
    fn bytes_arrive_in_order_within_the_buffer_count() {
        let path = std::env::temp_dir().join(format!("xdb-transfer-{}", std::process::id()));
        let f = File::create(&path).unwrap();
        let settings = TransferSettings {
            buffer_count: 3,
            max_transfer: MIN_TRANSFER,
        };
        let mut t = Transfer::start(f, settings).unwrap();
        let mut expected = Vec::new();
        for i in 0..2000u32 {
            let chunk: Vec<u8> = (0..(i % 517)).map(|j| (i ^ j) as u8).collect();
            t.write_all(&chunk).unwrap();
            expected.extend_from_slice(&chunk);
            assert!(t.allocated <= 3, "buffers {}", t.allocated);
        }
        let (f, r) = t.finish();
        r.unwrap();
        let mut f = f.unwrap();
        assert_eq!(f.stream_position().unwrap(), expected.len() as u64);
        let mut got = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        File::open(&path).unwrap().read_to_end(&mut got).unwrap();
        assert_eq!(got, expected);
        std::fs::remove_file(&path).unwrap();
    }

    /// Proves a write error reaches the backup: a file opened read-only fails the first
    /// buffer's write, and the writer's error comes back from `write` or `finish`.
    #[test]
    fn a_write_error_comes_back() {
        let path = std::env::temp_dir().join(format!("xdb-transfer-ro-{}", std::process::id()));
        File::create(&path).unwrap();
        let f = File::open(&path).unwrap();
        let settings = TransferSettings {
            buffer_count: 1,
            max_transfer: MIN_TRANSFER,
        };
        let mut t = Transfer::start(f, settings).unwrap();
        let mut failed = false;
        for _ in 0..8 {
            if t.write_all(&vec![7u8; MIN_TRANSFER as usize]).is_err() {
                failed = true;
                break;
            }
        }
        let (_, r) = t.finish();
        assert!(failed || r.is_err());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        std::fs::remove_file(&path).unwrap();
    }
}
