//! The link log in mm-link's format, so mahimahi's `mm-throughput-graph` and `mm-delay-graph`
//! and scripts written for them read it unchanged: header lines (`# mahimahi mm-link ...`,
//! `# command line:`, `# queue:`, `# init timestamp:`, `# base timestamp:`), then one line per
//! event with the time in ms since the init timestamp: `T # 1504` (delivery opportunity),
//! `T + SIZE` (arrival), `T - SIZE DELAY` (departure), `T d PACKETS BYTES` (drop). Sizes count
//! the 4-byte TUN header, as mahimahi's do.

use crate::error::{EmuError, Result};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes one link direction's log.
#[derive(Debug)]
pub struct LinkLog {
    path: PathBuf,
    out: BufWriter<std::fs::File>,
    failed: bool,
}

/// What the log header says.
#[derive(Clone, Debug)]
pub struct LogHeader {
    /// `Uplink` or `Downlink`.
    pub direction: String,
    /// The trace file or a description of the rate (`rate 50mbit`, `schedule ...`).
    pub source: String,
    /// The command line that started the emulator.
    pub command_line: String,
    /// The queue as mahimahi describes it.
    pub queue: String,
    /// Wall-clock ms (Unix epoch) of the emulator's time origin.
    pub init_unix_ms: u64,
    /// The link's start, ms after the origin.
    pub base_ms: u64,
}

impl LinkLog {
    /// Create the log file and write its header.
    pub fn create(path: &Path, h: &LogHeader) -> Result<LinkLog> {
        let err = |source| EmuError::Log {
            path: path.to_path_buf(),
            source,
        };
        let f = std::fs::File::create(path).map_err(err)?;
        let mut out = BufWriter::with_capacity(1 << 16, f);
        let hdr = format!(
            "# mahimahi mm-link ({}) [{}] > {}\n# command line: {}\n# queue: {}\n# init timestamp: {}\n# base timestamp: {}\n",
            h.direction,
            h.source,
            path.display(),
            h.command_line,
            h.queue,
            h.init_unix_ms,
            h.base_ms
        );
        out.write_all(hdr.as_bytes()).map_err(err)?;
        Ok(LinkLog {
            path: path.to_path_buf(),
            out,
            failed: false,
        })
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if self.failed {
            return;
        }
        if let Err(e) = self.out.write_fmt(args) {
            self.failed = true;
            tracing::error!("{}: cannot write log: {e}", self.path.display());
        }
    }

    /// A delivery opportunity at `t_ms`.
    pub fn opportunity(&mut self, t_ms: u64, bytes: u32) {
        self.line(format_args!("{t_ms} # {bytes}\n"));
    }

    /// An arrival.
    pub fn arrival(&mut self, t_ms: u64, size: u32) {
        self.line(format_args!("{t_ms} + {size}\n"));
    }

    /// A departure with its delay in ms.
    pub fn departure(&mut self, t_ms: u64, size: u32, delay_ms: u64) {
        self.line(format_args!("{t_ms} - {size} {delay_ms}\n"));
    }

    /// Packets dropped at `t_ms`.
    pub fn drop(&mut self, t_ms: u64, packets: usize, bytes: u64) {
        self.line(format_args!("{t_ms} d {packets} {bytes}\n"));
    }

    /// Flush buffered lines.
    pub fn flush(&mut self) {
        if !self.failed && self.out.flush().is_err() {
            self.failed = true;
        }
    }
}

impl Drop for LinkLog {
    fn drop(&mut self) {
        self.flush();
    }
}
