//! The collector binary as a child process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::http::http;
use crate::process::{binary, libfaketime};

/// The collector as a child process, SIGKILLed on drop.
pub struct Collector {
    child: Child,
    pub port: u16,
    config: PathBuf,
    bin: PathBuf,
    clock_offset_s: i64,
}

impl Collector {
    /// This workspace's collector binary (built when missing).
    pub fn bin() -> PathBuf {
        binary("storwatch-collector", "storwatch-collector")
    }

    /// Writes `dir/collector.toml` — listening on 127.0.0.1:`port`, its queue in `dir/queue`, a
    /// heartbeat every second, one v1 output to database `db` of `influx` with quick retries —
    /// and `dir/tokens`, holding `token` under the name `agents`. Returns the config's path.
    pub fn write_config(dir: &Path, port: u16, influx: &str, db: &str, token: &str) -> PathBuf {
        let config = dir.join("collector.toml");
        std::fs::write(dir.join("tokens"), format!("agents:{token}\n")).unwrap();
        // a secret: the collector refuses a token file other users can read
        std::fs::set_permissions(
            dir.join("tokens"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();

        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{q}\"\ntoken_file = \"{t}\"\n\
                 [heartbeat]\ninterval_s = 1\n\
                 [[outputs]]\nname = \"influx\"\nurl = \"{influx}\"\ndb = \"{db}\"\n\
                 backoff_min_ms = 50\nbackoff_max_s = 1\n",
                q = dir.join("queue").display(),
                t = dir.join("tokens").display(),
            ),
        )
        .unwrap();
        config
    }

    /// [`Collector::write_config`], then starts the collector on it.
    pub fn start(dir: &Path, port: u16, influx: &str, db: &str, token: &str) -> Collector {
        let config = Collector::write_config(dir, port, influx, db, token);
        Collector::spawn(Collector::bin(), config, port, 0)
    }

    /// Starts the collector binary `bin` on an existing config file whose listen port is
    /// `port`, and waits until it answers /ping.
    pub fn start_with_config(bin: &Path, config: &Path, port: u16) -> Collector {
        Collector::spawn(bin.to_path_buf(), config.to_path_buf(), port, 0)
    }

    /// Like [`Collector::start_with_config`], with the collector's wall clock `offset_s` seconds
    /// off (libfaketime, preloaded; its monotonic clock, which times its timers, is left alone).
    /// Whatever it does is stamped as though it ran then: a host it hears from is last seen
    /// then, and a collector started later on the same queue directory remembers it so.
    pub fn start_with_clock_offset(
        bin: &Path,
        config: &Path,
        port: u16,
        offset_s: i64,
    ) -> Collector {
        Collector::spawn(bin.to_path_buf(), config.to_path_buf(), port, offset_s)
    }

    fn spawn(bin: PathBuf, config: PathBuf, port: u16, clock_offset_s: i64) -> Collector {
        let mut cmd = Command::new(&bin);
        cmd.arg("--config")
            .arg(&config)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null());
        if clock_offset_s != 0 {
            cmd.env("LD_PRELOAD", libfaketime())
                .env("FAKETIME", format!("{clock_offset_s:+}"))
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = cmd.spawn().expect("start the collector");
        let mut c = Collector {
            child,
            port,
            config,
            bin,
            clock_offset_s,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // One that exited (its error above: a port taken, a bad config) fails the test here,
            // not later through whatever else answers on its port.
            if let Ok(Some(status)) = c.child.try_wait() {
                panic!("the collector on port {port} exited ({status}) before answering /ping");
            }
            if http(&c.url("/ping"), "GET", &[], b"").0 == 204 {
                break;
            }
            assert!(Instant::now() < deadline, "collector did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        c
    }

    /// Its process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// kill -9, and stay down.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Start again after [`Collector::stop`], on the same queue (and clock).
    pub fn start_again(&mut self) {
        let fresh = Collector::spawn(
            self.bin.clone(),
            self.config.clone(),
            self.port,
            self.clock_offset_s,
        );
        *self = fresh;
    }

    /// kill -9 and start again on the same queue.
    pub fn crash_and_restart(&mut self) {
        self.stop();
        self.start_again();
    }
    /// With `high_watermark_bytes = 0` in its config and its output unreachable: writes one line
    /// for `db` with `token` and checks the next write is refused with 503 (the queue is above
    /// its watermark). The backlog is the queue's end less the outputs' cursor, which a fresh
    /// collector's output moves past the first segment's header only when it first reads the
    /// queue: until then even the first line is refused, so it is sent until accepted.
    pub fn fill_above_watermark(&self, db: &str, token: &str) {
        let auth = format!("Token {token}");
        let write = self.url(&format!("/write?db={db}"));
        let post = |line: &[u8]| http(&write, "POST", &[("Authorization", &auth)], line);
        let accepted = crate::wait_for(Duration::from_secs(10), || post(b"m,host=a v=1i").0 == 204);
        assert!(accepted, "the collector never accepted its first line");
        let (code, text) = post(b"m,host=a v=2i");
        assert_eq!(code, 503, "{text}");
    }

    /// A value from its /metrics, `name` without the `storwatch_collector_` prefix and with
    /// its labels, e.g. `output_retries_total{output="influx"}` (0 when it is not there).
    pub fn metric(&self, name: &str) -> u64 {
        let (_, text) = http(&self.url("/metrics"), "GET", &[], b"");
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("storwatch_collector_{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Every metric of its /metrics whose name (without the `storwatch_collector_` prefix)
    /// starts with `name`, as (name with labels, value).
    pub fn metrics(&self, name: &str) -> Vec<(String, f64)> {
        let (code, text) = http(&self.url("/metrics"), "GET", &[], b"");
        assert_eq!(code, 200, "{text}");
        text.lines()
            .filter_map(|l| l.strip_prefix("storwatch_collector_"))
            .filter(|l| l.starts_with(name))
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_string(), v.trim().parse().ok()?))
            })
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
