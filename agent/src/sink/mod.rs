//! Where reports go: stdout, an appended file, or (see [`http`]) an InfluxDB-compatible write URL
//! through a durable [`spool`].
//!
//! The sampling loop hands each report, as complete line-protocol lines, to one [`Sink`]. A sink
//! must not stall the loop for long: slow or remote sinks queue internally.

pub mod http;
pub mod spool;

use std::io::{self, Write};
use std::path::PathBuf;

use storwatch_wire::rotate::{RotateError, RotatingFile, Rotation};

/// Counters a sink exposes in the agent's own measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Bytes waiting in the local spool.
    pub spool_bytes: u64,
    /// Lines dropped since start (spool full, or rejected as malformed by the server).
    pub dropped_lines: u64,
    /// Times a `file:` output was rotated since it was opened; `None` for other outputs.
    pub file_rotations: Option<u64>,
}

/// Failure to hand data to a sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Writing to the output file failed (a full disk, a directory that went away).
    #[error("output file {0}")]
    File(#[from] RotateError),
    /// Writing to stdout failed.
    #[error("{target}: {source}")]
    Io {
        /// What was being written.
        target: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The output specification is not understood.
    #[error("output {0:?}: expected '-', 'file:PATH' or an http(s):// URL")]
    BadSpec(String),
    /// The output's settings are unusable (URL, token file, TLS files, limits).
    #[error("output configuration: {0}")]
    Config(String),
    /// The spool could not be opened or written.
    #[error(transparent)]
    Spool(#[from] spool::SpoolError),
    /// Anything else the sink reports.
    #[error("{0}")]
    Other(String),
}

/// Opens the sink an `--output` spec names; `http` applies to `http(s)://` outputs only, `file`
/// to `file:PATH` outputs only.
pub fn open(
    spec: &OutputSpec,
    http: &http::HttpConfig,
    file: &Rotation,
) -> Result<Box<dyn Sink>, SinkError> {
    Ok(match spec {
        OutputSpec::Stdout => Box::new(StdoutSink),
        OutputSpec::File(path) => Box::new(FileSink::open(path.clone(), file)?),
        OutputSpec::Http(url) => Box::new(http::HttpSink::open(url, http)?),
    })
}

/// A destination for line protocol.
pub trait Sink: Send {
    /// Takes one batch of complete lines (each ending in `\n`).
    fn send(&mut self, batch: &[u8]) -> Result<(), SinkError>;
    /// Pushes out anything buffered; called at shutdown.
    fn flush(&mut self) -> Result<(), SinkError>;
    /// Spool and drop counters for the agent measurement.
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// A parsed `--output` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputSpec {
    /// `-`: standard output.
    Stdout,
    /// `file:PATH`: append to PATH.
    File(PathBuf),
    /// `http://…` or `https://…`: an InfluxDB-compatible write URL.
    Http(String),
}

impl std::str::FromStr for OutputSpec {
    type Err = SinkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "-" {
            Ok(Self::Stdout)
        } else if let Some(path) = s.strip_prefix("file:") {
            if path.is_empty() {
                return Err(SinkError::BadSpec(s.to_owned()));
            }
            Ok(Self::File(PathBuf::from(path)))
        } else if s.starts_with("http://") || s.starts_with("https://") {
            Ok(Self::Http(s.to_owned()))
        } else {
            Err(SinkError::BadSpec(s.to_owned()))
        }
    }
}

/// Writes each batch to standard output and flushes it, so `| head` and pipes see whole reports.
#[derive(Debug, Default)]
pub struct StdoutSink;

impl Sink for StdoutSink {
    fn send(&mut self, batch: &[u8]) -> Result<(), SinkError> {
        let mut out = io::stdout().lock();
        out.write_all(batch)
            .and_then(|()| out.flush())
            .map_err(|source| SinkError::Io {
                target: "stdout".into(),
                source,
            })
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        io::stdout().flush().map_err(|source| SinkError::Io {
            target: "stdout".into(),
            source,
        })
    }
}

/// Appends each batch to a file with one `write` call, so concurrent readers (`tail -f`, a
/// benchmark counting lines) never see half a report, and rotates the file by size
/// ([`Rotation`], `[file]` in the config file); a report is never split across two files.
#[derive(Debug)]
pub struct FileSink {
    file: RotatingFile,
    /// Times the file was rotated since start.
    rotations: u64,
}

impl FileSink {
    /// Opens (creating if needed) `path` for appending, so that a path the agent may not write
    /// is an error at start rather than at the first report.
    pub fn open(path: PathBuf, rotation: &Rotation) -> Result<Self, SinkError> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| SinkError::Io {
                target: path.display().to_string(),
                source,
            })?;
        // Readable by others as before this file rotated: reports are no secret.
        let file = RotatingFile::new(path, *rotation, 0o644, false);
        Ok(Self { file, rotations: 0 })
    }

    /// Times the file was rotated since it was opened.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }
}

impl Sink for FileSink {
    fn send(&mut self, batch: &[u8]) -> Result<(), SinkError> {
        if self.file.append(batch)?.rotated {
            self.rotations += 1;
        }
        Ok(())
    }

    fn stats(&self) -> SinkStats {
        SinkStats {
            file_rotations: Some(self.rotations),
            ..SinkStats::default()
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        // Every batch is written straight to the file; at shutdown make it durable too.
        Ok(self.file.sync()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_specs() {
        assert_eq!("-".parse::<OutputSpec>().ok(), Some(OutputSpec::Stdout));
        assert_eq!(
            "file:/tmp/x.lp".parse::<OutputSpec>().ok(),
            Some(OutputSpec::File("/tmp/x.lp".into()))
        );
        assert!(matches!(
            "http://127.0.0.1:8086/write?db=x".parse::<OutputSpec>(),
            Ok(OutputSpec::Http(_))
        ));
        assert!("file:".parse::<OutputSpec>().is_err());
        assert!("ftp://x".parse::<OutputSpec>().is_err());
    }

    #[test]
    fn file_sink_appends() {
        let dir = std::env::temp_dir().join(format!("storwatch-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("out.lp");
        std::fs::remove_file(&path).ok();
        let mut s = FileSink::open(path.clone(), &Rotation::default()).expect("open");
        s.send(b"a x=1i 1\n").expect("send");
        s.send(b"a x=2i 2\n").expect("send");
        s.flush().expect("flush");
        let got = std::fs::read_to_string(&path).expect("read");
        assert_eq!(got, "a x=1i 1\na x=2i 2\n");
        assert_eq!(s.rotations(), 0);
        let small = Rotation {
            max_file_bytes: 20,
            keep_files: 1,
        };
        let mut s = FileSink::open(path.clone(), &small).expect("open");
        s.send(b"a x=3i 3\n").expect("send");
        assert_eq!(s.rotations(), 1);
        let rotated = std::fs::read_to_string(dir.join("out.lp.1")).expect("read");
        assert_eq!(rotated, "a x=1i 1\na x=2i 2\n");
        let full = FileSink::open("/dev/full".into(), &small);
        if let Ok(mut full) = full {
            let e = full.send(b"a x=1i 1\n").expect_err("ENOSPC");
            assert!(e.to_string().contains("filesystem is full"), "{e}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
