//! Files other processes read or bind: output files written whole or not at all, and the paths
//! of unix sockets ([`socket_path`]).
//!
//! Summaries, traces, bills, statistics and certificates are read by other programs, often
//! while the writer runs (a sender polls for a certificate, a script for a summary). A file
//! written in place can be seen half-written, and a writer that fails midway leaves a torn
//! file behind. [`write_whole`] writes into a temporary file beside the target and renames it
//! over the target only once everything is written: a reader sees the old file or the new one,
//! never a part, and on failure the target is left as it was and the temporary file removed.

pub mod socket_path;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A temporary file beside the target, removed when dropped unless it was renamed into place
/// (also when the writer panics).
struct Temporary {
    path: PathBuf,
    persisted: bool,
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Create a new temporary file beside `path`, hidden (so globbing for results does not pick it
/// up) and named by this process, a call counter and the clock. It is created exclusively: a
/// name already taken (another process of the same id in another PID namespace) is never
/// shared, the next name is tried.
fn create_beside(path: &Path) -> io::Result<(std::fs::File, Temporary)> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tries = 0;
    loop {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = path.with_file_name(format!(".{name}.tmp-{}-{n}-{nanos}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => {
                return Ok((
                    f,
                    Temporary {
                        path: tmp,
                        persisted: false,
                    },
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Write the file at `path` whole: `write` fills a buffered temporary file beside it, which is
/// then renamed over `path`. On any error (from `write`, the file system or the rename), or a
/// panic in `write`, `path` keeps its earlier content, if any, and the temporary file is
/// removed. The file is not synced to disk: a reader or a crash of the process sees the old
/// file or the new one, a power cut may see neither.
pub fn write_whole(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let (file, mut tmp) = create_beside(path)?;
    let mut w = io::BufWriter::new(file);
    write(&mut w)?;
    w.flush()?;
    drop(w);
    std::fs::rename(&tmp.path, path)?;
    tmp.persisted = true;
    Ok(())
}

/// [`write_whole`] for content already in memory.
pub fn write_bytes(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    write_whole(path, |w| w.write_all(bytes.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.csv");
        write_bytes(&path, "a,b\n1,2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a,b\n1,2\n");

        let e = write_whole(&path, |w| {
            w.write_all(b"a,b\n3,")?;
            Err(io::Error::other("the writer failed midway"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("midway"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a,b\n1,2\n");
        assert_eq!(entries(dir.path()), ["summary.csv"]);

        // A target that is a directory: the rename fails, and the temporary file goes too.
        std::fs::create_dir(dir.path().join("trace.csv")).unwrap();
        assert!(write_bytes(&dir.path().join("trace.csv"), "x").is_err());
        assert_eq!(entries(dir.path()), ["summary.csv", "trace.csv"]);

        // A directory that does not exist: an error, and nothing created anywhere.
        let missing = dir.path().join("no-such-dir").join("bill.json");
        assert!(write_bytes(&missing, "{}").is_err());
        assert_eq!(entries(dir.path()), ["summary.csv", "trace.csv"]);
    }

    #[test]
    fn a_panicking_writer_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bill.json");
        let r = std::panic::catch_unwind(|| {
            let _ = write_whole(&path, |w| {
                w.write_all(b"{")?;
                panic!("the writer panicked");
            });
        });
        assert!(r.is_err());
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }

    #[test]
    fn concurrent_writers_of_one_path_never_mix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        let contents: Vec<String> = (0..8).map(|i| format!("{i}").repeat(64 * 1024)).collect();
        std::thread::scope(|s| {
            for c in &contents {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_bytes(path, c).unwrap();
                    }
                });
            }
        });
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(contents.contains(&last), "a mix of writers' contents");
        assert_eq!(entries(dir.path()), ["stats.json"]);
    }
}
