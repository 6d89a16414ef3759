//! Real InfluxDB clients against the collector binary, a real influxd behind it: each creates
//! or lists its database through `/query`, writes to it, and its points must land in that
//! database on influxd — not in the collector's own (`storwatch`) — while a database the
//! configuration does not allow is refused.
//!
//! * the influx CLI 1.6 (Debian's `influxdb-client`): `-execute`, `-import`, and an
//!   interactive `use db.rp` and `INSERT`;
//! * Python: `influxdb` 5.3 (Debian's `python3-influxdb`, the v1 client) and `influxdb-client`
//!   (PyPI, the v2 client, installed by `scripts/test.sh` into `target/pyclients`);
//! * Telegraf's `influxdb` (CREATE DATABASE first, then /write) and `influxdb_v2` outputs, when a
//!   telegraf binary is found (`STORWATCH_TELEGRAF`, else `PATH`); otherwise the test fails,
//!   or says SKIPPED with `STORWATCH_ALLOW_SKIP`. Building one takes minutes (see
//!   docs/collector.md).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use storwatch_test_support::{
    http, now_s, skip_or_fail, telegraf, wait_for, workspace, Collector, Influxd, Proc,
};

const TOKEN: &str = "clients-token-0123456789";

/// influxd with the collector's own database, and the collector in front of it allowing the
/// clients' databases.
struct Site {
    influx: Influxd,
    collector: Collector,
    dir: tempfile::TempDir,
}

fn site(influx_port: u16, port: u16) -> Site {
    let influx = Influxd::start_scratch(influx_port);
    influx.create_db("storwatch");
    let dir = tempfile::tempdir().unwrap();
    let config = Collector::write_config(dir.path(), port, &influx.url(), "storwatch", TOKEN);
    let text = std::fs::read_to_string(&config).unwrap();
    // a top-level table goes before [heartbeat]; a quick retry after the first 404
    let text = text.replacen(
        "[heartbeat]",
        "[targets]\nallow = [\"cli\", \"cli/autogen\", \"pyv1\", \"pyv2\", \"telegraf\", \"tgv2\"]\n[heartbeat]",
        1,
    ) + "auth_retry_s = 1\n";
    std::fs::write(&config, text).unwrap();
    let collector = Collector::start_with_config(
        Path::new(env!("CARGO_BIN_EXE_storwatch-collector")),
        &config,
        port,
    );
    Site {
        influx,
        collector,
        dir,
    }
}

impl Site {
    fn count(&self, db: &str, measurement: &str) -> f64 {
        self.influx
            .scalar(db, &format!("SELECT count(*) FROM \"{measurement}\""))
    }

    /// Waits until `db` holds `n` points of `measurement` (any number when `n` is 0).
    fn landed(&self, db: &str, measurement: &str, n: usize) {
        let ok = wait_for(Duration::from_secs(30), || {
            let c = self.count(db, measurement);
            if n == 0 {
                c > 0.0
            } else {
                c == n as f64
            }
        });
        assert!(
            ok,
            "{measurement} did not land in {db}: count {}; /health {}",
            self.count(db, measurement),
            http(&self.collector.url("/health"), "GET", &[], b"").1
        );
        // and not in the collector's own database
        assert_eq!(self.count("storwatch", measurement), 0.0, "{measurement}");
    }
}

/// Runs a command, failing the test with its output unless it exits 0; returns its stdout.
fn run(what: &str, cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The system's Python (Debian's packages are installed for it, not for another one on PATH),
/// with the PyPI clients `scripts/test.sh` installs into `target/pyclients`.
fn python(script: &str, port: u16) -> Command {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c")
        .arg(script)
        .env("PYTHONPATH", workspace().join("target/pyclients"))
        .env("PORT", port.to_string())
        .env("TOKEN", TOKEN)
        .env("TS", now_s().to_string());
    cmd
}

#[test]
fn influx_cli_and_python_clients_write_to_their_own_databases() {
    let s = site(18740, 18744);
    let port = s.collector.port;
    let ts = now_s();

    // the influx CLI: CREATE DATABASE, SHOW DATABASES, then -import (DDL, then DML)
    let cli = |args: &[&str]| {
        let mut cmd = Command::new("influx");
        cmd.args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .args(["-username", "cli", "-password", TOKEN])
            .args(args);
        cmd
    };
    run(
        "influx CREATE DATABASE",
        &mut cli(&["-execute", "CREATE DATABASE cli"]),
    );
    let shown = run(
        "influx SHOW DATABASES",
        &mut cli(&["-execute", "SHOW DATABASES"]),
    );
    for db in ["cli", "storwatch", "telegraf"] {
        assert!(shown.lines().any(|l| l.trim() == db), "{shown}");
    }
    let import = s.dir.path().join("import.txt");
    std::fs::write(
        &import,
        format!(
            "# DDL\nCREATE DATABASE cli\n# DML\n# CONTEXT-DATABASE: cli\n\
             cli_m,host=a v=1 {ts}000000000\ncli_m,host=b v=2 {ts}000000000\n\
             cli_m,host=c v=3 {ts}000000000\n"
        ),
    )
    .unwrap();
    let out = run(
        "influx -import",
        &mut cli(&["-import", "-path", import.to_str().unwrap()]),
    );
    assert!(
        out.contains("Processed 3 inserts") && out.contains("Failed 0 inserts"),
        "{out}"
    );
    let refused = cli(&["-execute", "CREATE DATABASE other"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stdout).into_owned()
        + &String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("\"other\" is not allowed"), "{said}");
    s.landed("cli", "cli_m", 3);
    // interactive: `use cli.autogen` asks SHOW DATABASES and SHOW RETENTION POLICIES, then
    // INSERT writes /write?db=cli&rp=autogen; the CLI takes commands only from a terminal,
    // which `script` gives it
    let session = format!(
        "(sleep 0.5; printf 'use cli.autogen\\nINSERT cli_tty,host=a v=1\\n\
         INSERT cli_tty,host=b v=2\\nexit\\n') | script -qfc 'influx -host 127.0.0.1 \
         -port {port} -username cli -password {TOKEN}' /dev/null"
    );
    let out = run(
        "influx, interactive",
        Command::new("bash").args(["-c", &session]),
    );
    assert!(out.contains("Using retention policy autogen"), "{out}");
    s.landed("cli", "cli_tty", 2);
    assert!(s.collector.metric("query_requests_total") >= 4);

    // influxdb (v1 client): create_database, get_list_database, write_points; a database not
    // allowed raises the collector's answer
    let v1 = r#"
import os
from influxdb import InfluxDBClient
from influxdb.exceptions import InfluxDBClientError
c = InfluxDBClient(host="127.0.0.1", port=int(os.environ["PORT"]), username="py",
                   password=os.environ["TOKEN"], database="pyv1")
c.create_database("pyv1")
names = [d["name"] for d in c.get_list_database()]
assert "pyv1" in names, names
ts = int(os.environ["TS"])
points = [{"measurement": "pyv1_m", "tags": {"host": h}, "time": ts, "fields": {"v": float(i)}}
          for i, h in enumerate(["a", "b"])]
assert c.write_points(points, time_precision="s")
try:
    c.write_points(points, time_precision="s", database="nope")
    raise SystemExit("a database not allowed was accepted")
except InfluxDBClientError as e:
    assert e.code == 403, (e.code, e.content)
    print("refused:", e.content)
try:
    c.query("DROP DATABASE pyv1")
    raise SystemExit("DROP DATABASE was accepted")
except InfluxDBClientError as e:
    assert e.code == 400, e.code
print("influxdb", ok := "ok")
"#;
    let out = run("python influxdb (v1 client)", &mut python(v1, port));
    assert!(out.contains("is not allowed"), "{out}");
    s.landed("pyv1", "pyv1_m", 2);

    // influxdb-client (v2 client): write to a bucket; the v1 output is sent CREATE DATABASE on
    // its first 404, since nothing created "pyv2" before
    let v2 = r#"
import os
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException
ts = int(os.environ["TS"])
with InfluxDBClient(url="http://127.0.0.1:" + os.environ["PORT"], token=os.environ["TOKEN"],
                    org="site") as c:
    w = c.write_api(write_options=SYNCHRONOUS)
    w.write(bucket="pyv2", record=[f"pyv2_m,host=a v=1i {ts}", f"pyv2_m,host=b v=2i {ts}",
                                   f"pyv2_m,host=c v=3i {ts}"], write_precision="s")
    try:
        w.write(bucket="nope", record=f"pyv2_m v=1i {ts}", write_precision="s")
        raise SystemExit("a bucket not allowed was accepted")
    except ApiException as e:
        assert e.status == 403, (e.status, e.body)
        print("refused:", e.body)
"#;
    let out = run("python influxdb-client (v2 client)", &mut python(v2, port));
    assert!(out.contains("is not allowed"), "{out}");
    s.landed("pyv2", "pyv2_m", 3);
}

#[test]
fn telegraf_outputs_write_to_their_own_databases() {
    let Some(bin) = telegraf() else {
        return skip_or_fail(
            "telegraf",
            "no telegraf binary (set STORWATCH_TELEGRAF or put telegraf on PATH)",
        );
    };
    let s = site(18750, 18754);
    let conf = s.dir.path().join("telegraf.conf");
    // Default settings of both outputs but the address and credentials: the influxdb output
    // sends CREATE DATABASE "telegraf" to /query, then writes /write?db=telegraf.
    std::fs::write(
        &conf,
        format!(
            r#"[agent]
  interval = "1s"
  flush_interval = "1s"
[[inputs.mem]]
[[outputs.influxdb]]
  urls = ["http://127.0.0.1:{port}"]
  username = "telegraf"
  password = "{TOKEN}"
[[outputs.influxdb_v2]]
  urls = ["http://127.0.0.1:{port}"]
  token = "{TOKEN}"
  organization = "site"
  bucket = "tgv2"
"#,
            port = s.collector.port
        ),
    )
    .unwrap();
    let log = s.dir.path().join("telegraf.log");
    let mut tg = Proc::spawn(
        "telegraf",
        &log,
        Command::new(&bin).args(["--config", conf.to_str().unwrap()]),
    );
    s.landed("telegraf", "mem", 0);
    s.landed("tgv2", "mem", 0);
    tg.kill();
    // its CREATE DATABASE went through /query
    assert!(s.collector.metric("query_requests_total") >= 1);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !text.contains("E! "),
        "telegraf logged errors:\n{}",
        tg.log_tail(30)
    );
}
