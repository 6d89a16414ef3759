//! `deploy/grafana/install.sh`, run as a site would: from the source tree, and from the files
//! the collector package puts under /usr/share/storwatch (laid out from collector/Cargo.toml's
//! deb assets). Both install the same datasource, dashboards and rules; every rule links to its
//! runbook under the site's URL, and nothing else in the rules changes. With `--datasource
//! prometheus` (or `both`) the Prometheus datasource and the PromQL dashboards, and with
//! `--prometheus-rules` Prometheus's rule file, which `promtool` accepts.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value as Yaml;
use storwatch_test_support::promtool_ok;

const BASE: &str = "https://wiki.example.org/storage/storwatch-runbooks";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the script; returns its output, or panics with it.
fn install(script: &Path, target: &Path, extra: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(script)
        .args(["--runbook-base", &format!("{BASE}/")])
        .arg("--provisioning")
        .arg(target.join("provisioning"))
        .arg("--dashboards")
        .arg(target.join("dashboards"))
        .arg("--systemd-dir")
        .arg(target.join("systemd"))
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{}: {text}", script.display());
    text
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// What a Grafana host has after the script, checked against the repository.
fn check_installed(target: &Path) {
    let repo = root();
    let prov = target.join("provisioning");
    // datasource as shipped; provider pointing at the dashboards directory used
    assert_eq!(
        std::fs::read(prov.join("datasources/storwatch.yaml")).unwrap(),
        std::fs::read(repo.join("deploy/grafana/provisioning/datasources/storwatch.yaml")).unwrap()
    );
    let provider: Yaml = serde_norway::from_str(
        &std::fs::read_to_string(prov.join("dashboards/storwatch.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        provider["providers"][0]["options"]["path"].as_str(),
        Some(target.join("dashboards").to_str().unwrap())
    );
    let shipped: BTreeSet<String> = names(&repo.join("dashboards"))
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .collect();
    // (the Prometheus set, with --datasource both, is checked by check_prometheus_installed)
    let influx_dashboards: BTreeSet<String> = names(&target.join("dashboards"))
        .into_iter()
        .filter(|n| !n.ends_with("-prometheus.json"))
        .collect();
    assert_eq!(influx_dashboards, shipped);
    for n in &shipped {
        assert_eq!(
            std::fs::read(target.join("dashboards").join(n)).unwrap(),
            std::fs::read(repo.join("dashboards").join(n)).unwrap(),
            "{n}"
        );
    }
    // the rules: only runbook_url differs, and it names an existing runbook under BASE
    let installed = std::fs::read_to_string(prov.join("alerting/storwatch-rules.yaml")).unwrap();
    let original = std::fs::read_to_string(repo.join("alerts/storwatch-rules.yaml")).unwrap();
    let links = runbook_links_only(&installed, &original);
    let doc: Yaml = serde_norway::from_str(&installed).unwrap();
    let rules: usize = doc["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_sequence().unwrap().len())
        .sum();
    assert_eq!(links, rules, "every rule has its runbook link");
    // the drop-in that gives the datasource its URL
    assert_eq!(
        std::fs::read_to_string(target.join("systemd/grafana-server.service.d/storwatch.conf"))
            .unwrap(),
        "[Service]\nEnvironment=STORWATCH_INFLUX_URL=http://influxdb.example.org:8086\n"
    );
}

#[test]
fn installs_from_the_source_tree() {
    let dir = tempfile::tempdir().unwrap();
    let out = install(
        &root().join("deploy/grafana/install.sh"),
        dir.path(),
        &["--influx-url", "http://influxdb.example.org:8086"],
    );
    assert!(out.contains("alert rules (runbooks at"), "{out}");
    assert!(out.contains("no notification policy installed"), "{out}");
    check_installed(dir.path());
    assert!(!dir
        .path()
        .join("provisioning/alerting/storwatch-policies.yaml")
        .exists());
    // the shipped example policy on request
    install(
        &root().join("deploy/grafana/install.sh"),
        dir.path(),
        &[
            "--influx-url",
            "http://influxdb.example.org:8086",
            "--policies",
            "example",
        ],
    );
    assert!(dir
        .path()
        .join("provisioning/alerting/storwatch-policies.yaml")
        .is_file());
}

/// The rule file `installed` against the repository's `original`: only runbook links differ, each
/// `BASE/<page>` of an existing runbook; returns how many.
fn runbook_links_only(installed: &str, original: &str) -> usize {
    let repo = root();
    let (a, b): (Vec<&str>, Vec<&str>) = (installed.lines().collect(), original.lines().collect());
    assert_eq!(a.len(), b.len());
    let mut links = 0;
    for (x, y) in a.iter().zip(&b) {
        if x == y {
            continue;
        }
        let page = y
            .trim_start()
            .strip_prefix("runbook_url: alerts/runbooks/")
            .unwrap_or_else(|| panic!("changed line that is no runbook link: {y}"));
        assert_eq!(x.trim_start(), format!("runbook_url: {BASE}/{page}"), "{y}");
        assert!(repo.join("alerts/runbooks").join(page).is_file(), "{page}");
        links += 1;
    }
    links
}

/// What `--datasource prometheus` (or `both`) with `--prometheus-url` puts on a Grafana host: the
/// Prometheus datasource as shipped but for `manageAlerts` (`manage_alerts`: Prometheus's rules
/// are the installation's, so Grafana lists them; else Grafana's are, and Prometheus's would be
/// listed beside them), every PromQL dashboard as `<name>-prometheus.json` beside the InfluxDB
/// ones, uids unique in the folder, the drop-in with the URL.
fn check_prometheus_installed(target: &Path, manage_alerts: bool) {
    let repo = root();
    let prov = target.join("provisioning");
    let shipped = repo.join("deploy/grafana/provisioning/datasources/storwatch-prometheus.yaml");
    let shipped = std::fs::read_to_string(&shipped).unwrap();
    assert!(shipped.contains("\n      manageAlerts: true\n"));
    let installed =
        std::fs::read_to_string(prov.join("datasources/storwatch-prometheus.yaml")).unwrap();
    assert_eq!(
        installed,
        shipped.replace(
            "manageAlerts: true",
            &format!("manageAlerts: {manage_alerts}")
        )
    );
    let ds: Yaml = serde_norway::from_str(&installed).unwrap();
    let ds = &ds["datasources"][0];
    assert_eq!(
        ds["jsonData"]["manageAlerts"].as_bool(),
        Some(manage_alerts)
    );
    assert_eq!(ds["uid"].as_str(), Some("storwatch-prometheus"));
    assert_eq!(ds["type"].as_str(), Some("prometheus"));
    assert_eq!(ds["url"].as_str(), Some("${STORWATCH_PROMETHEUS_URL}"));
    assert_eq!(ds["jsonData"]["timeInterval"].as_str(), Some("10s"));
    let promql: BTreeSet<String> = names(&repo.join("dashboards/prometheus"))
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert!(promql.len() >= 4, "{promql:?}");
    for n in &promql {
        let installed = format!("{}-prometheus.json", n.trim_end_matches(".json"));
        assert_eq!(
            std::fs::read(target.join("dashboards").join(&installed)).unwrap(),
            std::fs::read(repo.join("dashboards/prometheus").join(n)).unwrap(),
            "{installed}"
        );
    }
    // Grafana refuses a second dashboard with a uid it already has
    let mut uids = BTreeSet::new();
    for n in names(&target.join("dashboards")) {
        let d: serde_json::Value =
            serde_json::from_slice(&std::fs::read(target.join("dashboards").join(&n)).unwrap())
                .unwrap();
        let uid = d["uid"].as_str().unwrap().to_string();
        assert!(
            !n.ends_with("-prometheus.json") || uid.ends_with("-prom"),
            "{n}: {uid}"
        );
        assert!(uids.insert(uid), "{n}: uid twice in the folder");
    }
    assert_eq!(
        std::fs::read_to_string(
            target.join("systemd/grafana-server.service.d/storwatch-prometheus.conf")
        )
        .unwrap(),
        "[Service]\nEnvironment=STORWATCH_PROMETHEUS_URL=http://prometheus.example.org:9090\n"
    );
}

/// Prometheus's rule file as `--prometheus-rules DIR` installed it: the repository's with the
/// runbook links under BASE (one per alerting rule), and `promtool check rules` accepts it.
fn check_prometheus_rules(dir: &Path) {
    let file = dir.join("storwatch-rules.yml");
    let installed = std::fs::read_to_string(&file).unwrap();
    let original =
        std::fs::read_to_string(root().join("alerts/prometheus/storwatch-rules.yml")).unwrap();
    let doc: Yaml = serde_norway::from_str(&installed).unwrap();
    let alerts = doc["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .filter(|r| r.get("alert").is_some())
        .count();
    assert!(alerts > 0);
    assert_eq!(
        runbook_links_only(&installed, &original),
        alerts,
        "every alerting rule has its runbook link"
    );
    promtool_ok(
        &[OsStr::new("check"), OsStr::new("rules"), file.as_os_str()],
        None,
    );
}

/// `--datasource prometheus`: the Prometheus datasource and dashboards instead of the InfluxDB
/// ones, no Grafana rule (they are InfluxQL), the way to Prometheus's rule file printed, no
/// runbook base needed; `--prometheus-rules` installs that file. `both` puts the two side by
/// side; a re-run without `--datasource` keeps both; going back to `influxdb` (asked for) or on to
/// `prometheus` removes what the other choice put there.
#[test]
fn installs_the_prometheus_side() {
    let dir = tempfile::tempdir().unwrap();
    let script = root().join("deploy/grafana/install.sh");
    let prov = dir.path().join("provisioning");
    let url = ["--prometheus-url", "http://prometheus.example.org:9090"];
    // prometheus alone, without --runbook-base: no rule file is written, so none is needed
    let out = Command::new("bash")
        .arg(&script)
        .args(["--datasource", "prometheus"])
        .args(url)
        .arg("--provisioning")
        .arg(&prov)
        .arg("--dashboards")
        .arg(dir.path().join("dashboards"))
        .arg("--systemd-dir")
        .arg(dir.path().join("systemd"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("Prometheus datasource (uid storwatch-prometheus)"),
        "{text}"
    );
    assert!(
        text.contains("alerts/prometheus/storwatch-rules.yml") && text.contains("rule_files"),
        "says where the rule file is and how to load it: {text}"
    );
    check_prometheus_installed(dir.path(), true);
    assert!(!prov.join("datasources/storwatch.yaml").exists());
    assert!(!prov.join("alerting").exists(), "no Grafana rule");
    assert!(names(&dir.path().join("dashboards"))
        .iter()
        .all(|n| n.ends_with("-prometheus.json")));

    // both, with Prometheus's rules as the installation's: the InfluxDB datasource and
    // dashboards as before, the Prometheus ones beside, Prometheus's rule file, no Grafana rule
    let rules = dir.path().join("prometheus-rules");
    let both = [
        "--influx-url",
        "http://influxdb.example.org:8086",
        "--datasource",
        "both",
        url[0],
        url[1],
        "--alert-rules",
        "prometheus",
        "--prometheus-rules",
        rules.to_str().unwrap(),
    ];
    let out = install(&script, dir.path(), &both);
    assert!(!out.contains("alert rules (runbooks at"), "{out}");
    let alerts = std::fs::read_to_string(root().join("alerts/prometheus/storwatch-rules.yml"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("  - alert: "))
        .count();
    assert!(
        out.contains(&format!("storwatch-rules.yml ({alerts} alerting rules")),
        "{out}"
    );
    check_prometheus_installed(dir.path(), true);
    check_prometheus_rules(&rules);
    assert!(prov.join("datasources/storwatch.yaml").is_file());
    assert!(!prov.join("alerting/storwatch-rules.yaml").exists());

    // both, with Grafana's rules (the default): one set of rules, Grafana's, and the
    // Prometheus datasource's rules kept out of Grafana's alert list; the earlier run's
    // Prometheus rule file is the site's to unload (the script says so)
    let out = install(
        &script,
        dir.path(),
        &[
            "--influx-url",
            "http://influxdb.example.org:8086",
            "--datasource",
            "both",
            url[0],
            url[1],
        ],
    );
    assert!(out.contains("alert rules (runbooks at"), "{out}");
    assert!(out.contains("every alert fires twice"), "{out}");
    check_installed(dir.path());
    check_prometheus_installed(dir.path(), false);

    // a re-run without --datasource (an upgrade) keeps the Prometheus side an earlier run put there
    let out = install(
        &script,
        dir.path(),
        &["--influx-url", "http://influxdb.example.org:8086"],
    );
    assert!(!out.contains("removed"), "{out}");
    check_installed(dir.path());
    check_prometheus_installed(dir.path(), false);

    // back to InfluxDB alone, asked for: the Prometheus datasource and dashboards go, the rest is
    // as ever
    let out = install(
        &script,
        dir.path(),
        &[
            "--influx-url",
            "http://influxdb.example.org:8086",
            "--datasource",
            "influxdb",
        ],
    );
    assert!(out.contains("removed"), "{out}");
    check_installed(dir.path());
    assert!(!prov.join("datasources/storwatch-prometheus.yaml").exists());
    assert!(!names(&dir.path().join("dashboards"))
        .iter()
        .any(|n| n.ends_with("-prometheus.json")));
    // and on to Prometheus alone: the InfluxDB datasource, dashboards and rules go
    install(&script, dir.path(), &["--datasource", "prometheus"]);
    assert!(!prov.join("datasources/storwatch.yaml").exists());
    assert!(!prov.join("alerting/storwatch-rules.yaml").exists());
    assert!(prov.join("datasources/storwatch-prometheus.yaml").is_file());
    assert_eq!(
        names(&dir.path().join("dashboards")).len(),
        names(&root().join("dashboards/prometheus"))
            .iter()
            .filter(|n| n.ends_with(".json"))
            .count()
    );

    // what cannot go together is refused before anything is written
    let empty = tempfile::tempdir().unwrap();
    for args in [
        vec!["--datasource", "graphite"],
        vec!["--datasource", "prometheus", "--prometheus-rules", "/tmp/x"],
        // Prometheus's rules beside Grafana's: every alert twice
        vec![
            "--datasource",
            "both",
            "--runbook-base",
            BASE,
            "--prometheus-rules",
            "/tmp/x",
        ],
        vec!["--datasource", "prometheus", "--alert-rules", "grafana"],
        vec!["--datasource", "both", "--alert-rules", "alertmanager"],
        vec![
            "--datasource",
            "both",
            "--alert-rules",
            "prometheus",
            "--policies",
            "example",
        ],
        vec![
            "--datasource",
            "prometheus",
            "--influx-url",
            "http://i:8086",
        ],
        vec!["--prometheus-url", "http://p:9090", "--runbook-base", BASE],
        vec![
            "--datasource",
            "prometheus",
            "--prometheus-url",
            "prometheus:9090",
        ],
    ] {
        let out = Command::new("bash")
            .arg(&script)
            .args(&args)
            .arg("--provisioning")
            .arg(empty.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).is_empty(), "{args:?}");
    }
    assert_eq!(names(empty.path()), BTreeSet::new(), "nothing written");
}

/// A deb asset's sources (a `dir/*.ext` glob or one file), relative to collector/.
fn sources(pattern: &str) -> Vec<PathBuf> {
    let p = root().join("collector").join(pattern);
    let name = p.file_name().unwrap().to_string_lossy().into_owned();
    match name.split_once('*') {
        None => vec![p],
        Some((pre, post)) => {
            let dir = p.parent().unwrap();
            let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|f| {
                    let n = f.file_name().unwrap().to_string_lossy();
                    n.starts_with(pre) && n.ends_with(post) && n.len() >= pre.len() + post.len()
                })
                .collect();
            v.sort();
            assert!(!v.is_empty(), "{pattern} matches nothing");
            v
        }
    }
}

#[test]
fn installs_from_the_package_layout() {
    let cargo: toml::Value =
        toml::from_str(&std::fs::read_to_string(root().join("collector/Cargo.toml")).unwrap())
            .unwrap();
    let meta = &cargo["package"]["metadata"];
    let deb = meta["deb"]["assets"].as_array().unwrap();
    let fs = tempfile::tempdir().unwrap();
    for a in deb {
        let a = a.as_array().unwrap();
        let (src, dest) = (a[0].as_str().unwrap(), a[1].as_str().unwrap());
        if src.starts_with("target/") {
            continue;
        }
        for f in sources(src) {
            let to = if dest.ends_with('/') {
                fs.path().join(dest).join(f.file_name().unwrap())
            } else {
                fs.path().join(dest)
            };
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&f, &to).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }
    // the rpm (rpmbuild on deploy/packaging/rpm/storwatch-collector.spec, a stand-in binary: only
    // the shared files are compared) ships the same files
    let bin = tempfile::tempdir().unwrap();
    std::fs::write(bin.path().join("storwatch-collector"), "").unwrap();
    let out = Command::new(root().join("scripts/build-rpm.sh"))
        .arg("--bin")
        .arg(bin.path())
        .arg("--out")
        .arg(bin.path().join("rpm"))
        .args(["--fast", "collector"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build-rpm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rpm_file = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let list = Command::new("rpm")
        .args([
            "-qp",
            "--qf",
            "[%{FILEMODES:perms} %{FILENAMES}\\n]",
            &rpm_file,
        ])
        .output()
        .unwrap();
    assert!(list.status.success(), "rpm -qp {rpm_file}");
    let rpm_files: BTreeSet<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix('-'))
        .filter_map(|l| l.split_once(' ').map(|(_, path)| path.to_string()))
        .filter(|path| path.starts_with("/usr/share/storwatch/"))
        .collect();
    let mut deb_files = BTreeSet::new();
    let mut dirs = vec![fs.path().join("usr/share/storwatch")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(fs.path()).unwrap();
                deb_files.insert(format!("/{}", rel.display()));
            }
        }
    }
    assert!(deb_files.len() > 40, "{deb_files:?}");
    assert_eq!(
        rpm_files, deb_files,
        "deb and rpm differ under /usr/share/storwatch"
    );

    // the InfluxDB 2.x and 3 setups find their tasks and plugin in the package layout
    let influx = fs.path().join("usr/share/storwatch/influxdb");
    for (script, args, want) in [
        ("v2/setup.sh", ["--org", "site"], "3 buckets and 44 tasks"),
        (
            "v3/setup.sh",
            ["--plugin-dir", "/plugins"],
            "3 databases, 2 triggers",
        ),
    ] {
        let out = Command::new("bash")
            .arg(influx.join(script))
            .args(args)
            .arg("--dry-run")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(want),
            "{script}: {stdout}"
        );
    }

    let script = fs.path().join("usr/share/storwatch/grafana/install.sh");
    let target = fs.path().join("grafana-host");
    let out = install(
        &script,
        &target,
        &["--influx-url", "http://influxdb.example.org:8086"],
    );
    assert!(
        out.contains("/usr/share/storwatch/runbooks/*.md"),
        "runbooks are taken from the package: {out}"
    );
    check_installed(&target);
    // the Prometheus side from the package: datasource, PromQL dashboards, the rule file (and
    // the prometheus.yml that loads it, named in the output)
    let rules = fs.path().join("prometheus-host/rules");
    let out = install(
        &script,
        &target,
        &[
            "--influx-url",
            "http://influxdb.example.org:8086",
            "--datasource",
            "both",
            "--prometheus-url",
            "http://prometheus.example.org:9090",
            "--alert-rules",
            "prometheus",
            "--prometheus-rules",
            rules.to_str().unwrap(),
        ],
    );
    assert!(
        out.contains("/usr/share/storwatch/prometheus/prometheus.yml"),
        "{out}"
    );
    assert!(out.contains("removed"), "Grafana's rules go: {out}");
    check_prometheus_installed(&target, true);
    check_prometheus_rules(&rules);
}

#[test]
fn refuses_without_a_runbook_url_or_with_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let script = root().join("deploy/grafana/install.sh");
    for args in [
        vec![],
        vec!["--runbook-base", "wiki/runbooks"],
        vec!["--runbook-base", "https://wiki/x#y"],
    ] {
        let out = Command::new("bash")
            .arg(&script)
            .args(&args)
            .arg("--provisioning")
            .arg(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains("--runbook-base"), "{args:?}: {err}");
    }
    assert_eq!(names(dir.path()), BTreeSet::new(), "nothing written");
}
