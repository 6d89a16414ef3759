//! The monitor run inline with a stand-in `storcli` that prints corpus files (`exec cat`):
//! the exact lines of a healthy, a rebuilding, a write-through and a battery-failed controller,
//! and what garbage, a truncated answer and a missing program leave.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use storwatch_wire::lp::LineWriter;

use super::*;
use crate::collect::{ReportCx, SampleCx, SourceErrors};
use crate::event::Event;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/storcli")
        .join(name)
}

/// A directory with a stand-in storcli answering each call with the file of that name in the
/// directory: `show-all.json`, `vall.json`, `pds.json`, `rebuild.json` (a missing file: `cat`
/// fails, exit 1, no output).
struct Stand {
    dir: tempfile::TempDir,
    root: Root,
    events: Vec<Event>,
    errors: SourceErrors,
}

impl Stand {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("storcli64");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nd='{}'\necho \"$*\" >> \"$d/calls.log\"\ncase \"$1 $2 $3 $4\" in\n\
                 '/call show all J') exec cat \"$d/show-all.json\";;\n\
                 '/call/vall show all J') exec cat \"$d/vall.json\";;\n\
                 '/call/eall/sall show all J') exec cat \"$d/pds.json\";;\n\
                 '/call/eall/sall show rebuild J') exec cat \"$d/rebuild.json\";;\n\
                 *) echo \"unexpected: $*\" >&2; exit 1;;\n\
                 esac\n",
                dir.path().display()
            ),
        )
        .expect("script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(sys.join("block")).expect("sys");
        let root = Root::new(dir.path().join("proc"), sys);
        Self {
            dir,
            root,
            events: Vec::new(),
            errors: SourceErrors::new(&[SOURCE]),
        }
    }

    /// Answers `call` (`show-all`, `vall`, `pds`, `rebuild`) with `text`.
    fn answer(&self, call: &str, text: &str) {
        std::fs::write(self.dir.path().join(format!("{call}.json")), text).expect("answer");
    }

    fn answer_file(&self, call: &str, name: &str) {
        self.answer(
            call,
            &std::fs::read_to_string(fixture(name)).expect("fixture"),
        );
    }

    fn monitor(&self, program: Option<PathBuf>) -> HwraidCollector {
        let cfg = HwraidConfig {
            storcli: program.unwrap_or_else(|| self.dir.path().join("storcli64")),
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
            ..HwraidConfig::default()
        };
        HwraidCollector::new_inline(cfg, RiskModel::default(), self.root.clone())
    }

    /// One sample at `now_s` and the report after it.
    fn step(&mut self, m: &mut HwraidCollector, now_s: f64) -> String {
        let mut cx = SampleCx {
            root: &self.root,
            now_s,
            itv_cs: Some(100),
            uptime_cs: 0,
            events: &mut self.events,
            errors: &mut self.errors,
        };
        m.sample(&mut cx);
        let mut w = LineWriter::new("ds01", &[]);
        for e in &self.events {
            e.emit(&mut w, 1_700_000_000_000_000_000, false);
        }
        self.events.clear();
        let mut cx = ReportCx {
            root: &self.root,
            ts_ns: 1_700_000_000_000_000_000,
            now_s,
            uptime_cs: 0,
            errors: &mut self.errors,
        };
        Collector::report(m, &mut w, &mut cx);
        String::from_utf8(w.take()).expect("utf8")
    }
}

/// No `/c0/vall show all` capture of the netdata controller exists: its `show all` answer
/// stands in for it (the same VD rows, no properties).
fn netdata(s: &Stand, show_all: &str) {
    s.answer("show-all", show_all);
    s.answer("vall", show_all);
    s.answer_file(
        "pds",
        "netdata-c0-eall-sall-show-all-6-sata-media-other-predictive.json",
    );
}

/// The netdata controller with drive 252:3 rebuilding (its `show all` edited so), 37 % done.
fn rebuilding(s: &Stand) {
    netdata(
        s,
        &read("edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json"),
    );
    s.answer_file(
        "rebuild",
        "synthetic-c0-eall-sall-show-rebuild-252-3-37pct.json",
    );
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture")
}

#[test]
fn healthy_raid6_with_its_battery() {
    let mut s = Stand::new();
    netdata(
        &s,
        &read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
    );
    let mut m = s.monitor(None);
    insta::assert_snapshot!(s.step(&mut m, 1.0));
}

#[test]
fn raid6_rebuilding_after_a_healthy_round() {
    let mut s = Stand::new();
    netdata(
        &s,
        &read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
    );
    let mut m = s.monitor(None);
    s.step(&mut m, 1.0);
    rebuilding(&s);
    let text = s.step(&mut m, 61.0);
    assert!(
        text.contains("rebuild_progress_pct=37,rebuild_eta_s=18720i,rebuild_stalled=false"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn write_back_fallen_to_write_through() {
    let mut s = Stand::new();
    let good = "cloudpods-c0-vall-show-all-7-vds-os-drive-name-wb-wt.json";
    for c in ["show-all", "vall", "pds"] {
        s.answer_file(c, good);
    }
    let mut m = s.monitor(None);
    s.step(&mut m, 1.0);
    for c in ["show-all", "vall", "pds"] {
        s.answer_file(
            c,
            "edited-cloudpods-c0-vall-show-all-v0-write-back-fell-to-rwtd.json",
        );
    }
    let text = s.step(&mut m, 61.0);
    assert!(
        text.contains("object=c0/v0/cache text=\"c0/v0: write-back cache fell to write-through"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn battery_failed() {
    let mut s = Stand::new();
    let healthy = read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    netdata(&s, &healthy);
    let mut m = s.monitor(None);
    s.step(&mut m, 1.0);
    // The same controller's answer with its BBU's `State` Failed (no real capture of one).
    let failed = healthy.replace(
        "\"Model\": \"iBBU08\",\n            \"State\": \"Optimal\"",
        "\"Model\": \"iBBU08\",\n            \"State\": \"Failed\"",
    );
    assert_ne!(failed, healthy);
    netdata(&s, &failed);
    let text = s.step(&mut m, 61.0);
    assert!(text.contains("bbu_state=\"Failed\",bbu_ok=false"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn garbage_or_truncated_json_keeps_the_last_good_state() {
    let mut s = Stand::new();
    let healthy = read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    netdata(&s, &healthy);
    let mut m = s.monitor(None);
    let good = s.step(&mut m, 1.0);
    for (bad, why) in [
        ("garbage-not-json-error-line.json", "exit status 0: line 1"),
        (
            "truncated-netdata-c0-show-all-at-3000-bytes.json",
            "exit status 0: line ",
        ),
    ] {
        s.answer_file("show-all", bad);
        let text = s.step(
            &mut m,
            61.0 + 60.0 * f64::from(u8::from(bad.starts_with('t'))),
        );
        let ctl = text
            .lines()
            .find(|l| l.starts_with("raid_controller,"))
            .expect("controller line kept");
        assert!(ctl.contains("read_ok=false,last_read_age_s="), "{ctl}");
        assert!(
            ctl.contains(&format!("read_error=\"storcli /call show all J: {why}")),
            "{ctl}"
        );
        // the VD and drive lines are those of the last good round
        let keep = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with("raid_vd,") || l.starts_with("raid_pd,"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(keep(&text), keep(&good));
    }
    let totals = s.errors.totals();
    assert_eq!(totals, vec![(SOURCE.to_owned(), 2)]);
}

/// A controller with a ROC sensor (the HBA 9500 of the corpus, its 29 drives JBOD) reports its
/// temperature; the JBOD drives are in no VD.
#[test]
fn an_hba_reports_its_roc_temperature_and_jbod_drives() {
    let mut s = Stand::new();
    for c in ["show-all", "vall", "pds"] {
        s.answer_file(c, "netdata-c0-show-all-hba-9500-mpt3sas-jbod.json");
    }
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    let ctl = text
        .lines()
        .find(|l| l.starts_with("raid_controller,"))
        .expect("controller line");
    assert!(
        ctl.contains(
            ",vds=0i,vds_degraded=0i,vds_offline=0i,pds=29i,pds_failed=0i,roc_temperature_c=44i,"
        ),
        "{ctl}"
    );
    let pds: Vec<&str> = text.lines().filter(|l| l.starts_with("raid_pd,")).collect();
    assert_eq!(pds.len(), 29);
    assert!(
        pds.iter()
            .all(|l| l.contains(" state=\"JBOD\",ok=true") && !l.contains(",vd=")),
        "{text}"
    );
}

#[test]
fn no_storcli_no_lines_no_error() {
    let mut s = Stand::new();
    let mut m = s.monitor(Some(PathBuf::from("/nonexistent/storcli64")));
    assert_eq!(s.step(&mut m, 1.0), "");
    assert_eq!(s.step(&mut m, 61.0), "");
    assert_eq!(s.errors.interval_sum(), 0);
}

#[test]
fn a_failed_controller_answer_is_reported_with_its_message() {
    let mut s = Stand::new();
    let f = "pystorcli2-c0-show-status-failure-incomplete-foreign-config.json";
    for c in ["show-all", "vall", "pds"] {
        s.answer_file(c, f);
    }
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    let ctl = text
        .lines()
        .find(|l| l.starts_with("raid_controller,"))
        .expect("controller line");
    assert!(ctl.contains("read_ok=false"), "{ctl}");
    assert!(ctl.contains("Incomplete foreign configuration"), "{ctl}");
    assert!(text.lines().any(|l| l.starts_with("raid_vd,")), "{text}");
}

#[test]
fn a_drive_s_smartctl_reading_is_preferred_to_storcli_s_counters() {
    let mut s = Stand::new();
    rebuilding(&s);
    let vd = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("raid_vd,"))
            .expect("vd line")
            .to_owned()
    };
    let field = |line: &str, key: &str| -> f64 {
        line.split([' ', ','])
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .map(|v| v.trim_end_matches('i'))
            .and_then(|v| v.parse().ok())
            .expect("field")
    };
    let mut plain = s.monitor(None);
    let before = vd(&s.step(&mut plain, 1.0));
    assert_eq!(field(&before, "members_at_risk"), 0.0);

    // smartctl read 252:5 (serial ZL21DC50, clean in storcli's counters) with pending sectors
    let book = DriveBook::new(false);
    book.publish(vec![crate::collect::book::BookEntry {
        device: "bus/0:megaraid,31".into(),
        serial: Some("ZL21DC50".into()),
        wwn: None,
        model: Some("ST16000NM001G-2KK103".into()),
        afr: 0.32,
        at_risk: true,
        failure_probability: 0.006,
    }]);
    let mut joined = s.monitor(None).with_book(book.clone());
    let text = s.step(&mut joined, 1.0);
    let after = vd(&text);
    assert_eq!(field(&after, "members_at_risk"), 1.0, "{after}");
    // one survivor of five at 16 times the flat rate: the pairs that lose the RAID6 go from
    // 10 p² to 6 p² + 4 × 16 p², seven times as likely
    let ratio = field(&after, "rebuild_risk") / field(&before, "rebuild_risk");
    assert!((6.5..7.5).contains(&ratio), "{before}\n{after}");
    let pd = text
        .lines()
        .find(|l| l.contains(",slot=252:5,"))
        .expect("252:5");
    let p = field(pd, "failure_probability");
    let want = crate::health::risk::disk_failure_probability(0.32, 168.0);
    assert!((p - want).abs() < 1e-12, "{pd}");
    // and the book learnt which VD the drive is in, for its `drive` line's raid_vd tag
    assert_eq!(book.view().raid_vd_of(Some("ZL21DC50"), None), "c0/v0");
}

/// A controller that hangs one command costs the round one timeout: after `/call/vall` hangs,
/// `/call/eall/sall` is not run, and the round still reports what `show all` gave.
#[test]
fn after_a_call_hangs_the_rest_of_the_round_is_not_run() {
    let mut s = Stand::new();
    let dir = s.dir.path().to_owned();
    let show = fixture("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    let script = dir.join("hanging-storcli64");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1 $2 $3\" >> '{log}'\ncase \"$1\" in\n\
             /call) exec cat '{show}';;\n\
             /call/vall) exec sleep 1000;;\n\
             *) exec cat '{show}';;\n\
             esac\n",
            log = dir.join("calls.log").display(),
            show = show.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = HwraidConfig {
        storcli: script,
        timeout: Duration::from_secs(1),
        ..HwraidConfig::default()
    };
    let mut m = HwraidCollector::new_inline(cfg, RiskModel::default(), s.root.clone());
    let text = s.step(&mut m, 1.0);
    let calls = std::fs::read_to_string(dir.join("calls.log")).expect("calls");
    assert_eq!(calls, "/call show all\n/call/vall show all\n");
    let ctl = text
        .lines()
        .find(|l| l.starts_with("raid_controller,"))
        .expect("controller line");
    assert!(
        ctl.contains("read_ok=false")
            && ctl.contains("read_error=\"storcli /call/vall show all J: ")
            && ctl.contains("no answer within 1s, killed"),
        "{ctl}"
    );
    assert!(
        text.contains("raid_vd,host=ds01,controller=c0,vd=c0/v0,"),
        "{text}"
    );
}

/// Lines of `text` that start with `prefix`.
fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

fn controller_line<'a>(text: &'a str, c: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("raid_controller,host=ds01,controller={c},")))
        .unwrap_or_else(|| panic!("no {c} line in\n{text}"))
}

fn calls(s: &Stand) -> Vec<String> {
    std::fs::read_to_string(s.dir.path().join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A `Failure` answer to `/call/eall/sall show all J` or `/call/vall show all J` on a RAID
/// controller is a fault of that call: reported against the controller, and its detail — each
/// drive's counters and serial, each VD's members — stays that of the last good round. (The
/// failure answer is storcli's real one to a refused command.)
#[test]
fn a_detail_call_answering_failure_keeps_the_last_detail_and_says_so() {
    let mut s = Stand::new();
    netdata(
        &s,
        &read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
    );
    let mut m = s.monitor(None);
    let good = s.step(&mut m, 1.0);
    assert!(good.contains(",serial=ZL21DC50,"), "{good}");
    assert!(
        controller_line(&good, "c0").contains("read_ok=true"),
        "{good}"
    );
    let refused = read("pystorcli2-c0-e252-s7-set-good-failure-errcd-255.json");
    for call in ["pds", "vall"] {
        s.answer(call, &refused);
    }
    // `show all` lists what it did on a healthy controller: the drives' call waits for its
    // fifth round since it was made, then is made every round while it fails; the VDs' for
    // its tenth.
    let (vds, pds) = (detail::VDS_READ_EVERY, detail::PDS_READ_EVERY);
    let mut now_s = 1.0;
    for round in 2..=vds + 1 {
        now_s += 60.0;
        let text = s.step(&mut m, now_s);
        // every drive keeps its serial and counters, every VD its members
        assert_eq!(lines(&text, "raid_pd,"), lines(&good, "raid_pd,"));
        assert_eq!(lines(&text, "raid_vd,"), lines(&good, "raid_vd,"));
        let ctl = controller_line(&text, "c0");
        let said = |call: &str| {
            ctl.contains(&format!(
                "storcli {call}: Set Drive Good Failed.: Operation not allowed."
            ))
        };
        let (pds_said, vds_said) = (round > pds, round == vds + 1);
        assert_eq!(
            said("/call/eall/sall show all J"),
            pds_said,
            "{round}: {ctl}"
        );
        assert_eq!(said("/call/vall show all J"), vds_said, "{round}: {ctl}");
        assert_eq!(ctl.contains("read_ok=false"), pds_said, "{round}: {ctl}");
    }
    assert_eq!(
        s.errors.totals(),
        vec![(SOURCE.to_owned(), u64::from(vds - pds + 2))]
    );
    // the next good answers are taken again
    netdata(
        &s,
        &read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
    );
    let again = s.step(&mut m, now_s + 60.0);
    assert!(
        controller_line(&again, "c0").contains("read_ok=true"),
        "{again}"
    );
}

/// An HBA in IT mode has no VD, and storcli refuses `/call/vall` there ("Un-supported
/// command", as storcli 7.15 answers a UCSC-SAS-M5HD): nothing is lost, so it is no error.
#[test]
fn an_hba_refusing_the_vd_call_is_not_an_error() {
    let mut s = Stand::new();
    s.answer_file("show-all", "netdata-c0-show-all-hba-9500-mpt3sas-jbod.json");
    s.answer_file(
        "vall",
        "synthetic-c0-vall-show-all-un-supported-command.json",
    );
    s.answer_file("pds", "netdata-c0-show-all-hba-9500-mpt3sas-jbod.json");
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    let ctl = controller_line(&text, "c0");
    assert!(
        ctl.contains("read_ok=true") && !ctl.contains("read_error"),
        "{ctl}"
    );
    assert_eq!(s.errors.interval_sum(), 0);
    // The same refusal where `show all` lists VDs is a fault.
    let mut s = Stand::new();
    netdata(
        &s,
        &read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
    );
    s.answer_file(
        "vall",
        "synthetic-c0-vall-show-all-un-supported-command.json",
    );
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    let ctl = controller_line(&text, "c0");
    assert!(
        ctl.contains("read_ok=false")
            && ctl.contains("storcli /call/vall show all J: Un-supported command"),
        "{ctl}"
    );
}

/// storcli answering `{"Controllers":[{}]}` names no controller: an error, and the last good
/// state stays (a degraded VD's series does not just stop).
#[test]
fn an_answer_naming_no_controller_keeps_the_last_state() {
    let mut s = Stand::new();
    rebuilding(&s);
    let mut m = s.monitor(None);
    let good = s.step(&mut m, 1.0);
    s.answer_file("show-all", "synthetic-call-show-all-one-empty-entry.json");
    let text = s.step(&mut m, 61.0);
    let ctl = controller_line(&text, "c0");
    assert!(
        ctl.contains("read_ok=false")
            && ctl.contains("read_error=\"storcli /call show all J: no controller named in the answer (an empty entry {})"),
        "{ctl}"
    );
    assert_eq!(lines(&text, "raid_vd,"), lines(&good, "raid_vd,"));
    assert!(text.contains("degraded=true"), "{text}");
    assert_eq!(s.errors.totals(), vec![(SOURCE.to_owned(), 1)]);
}

/// A VD state the agent does not know (`Rec`) is not healthy redundancy: no
/// `redundancy_left`, no `rebuild_risk`, and an event even in the first round.
#[test]
fn a_vd_state_not_known_reads_as_unknown() {
    let mut s = Stand::new();
    let healthy = read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    let rec = healthy.replace("\"State\": \"Optl\"", "\"State\": \"Rec\"");
    assert_ne!(rec, healthy);
    netdata(&s, &rec);
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    let vd = lines(&text, "raid_vd,")[0];
    assert!(
        vd.contains(" state=\"Rec\",ok=false,degraded=false,"),
        "{vd}"
    );
    assert!(
        !vd.contains("redundancy_left") && !vd.contains("rebuild_risk"),
        "{vd}"
    );
    assert!(
        text.contains("event,host=ds01,source=hwraid,object=c0/v0 ")
            && text.contains("in state Rec, which storwatch does not know"),
        "{text}"
    );
}

/// nytrocli prints a Nytro WarpDrive's one VD as `"DG/VD": 0`, a number: it is read
/// (controller c1 of a real two-controller answer), not dropped.
#[test]
fn a_numeric_dg_vd_is_a_virtual_drive() {
    let mut s = Stand::new();
    let f = "mirantis-nytrocli-call-show-all-nytro-megaraid-and-warpdrive-dg-vd-number.json";
    for c in ["show-all", "vall", "pds"] {
        s.answer_file(c, f);
    }
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    assert!(controller_line(&text, "c1").contains(",vds=1i,"), "{text}");
    assert!(
        text.contains("raid_vd,host=ds01,controller=c1,vd=c1/v0,level=RAID0 state=\"Optl\""),
        "{text}"
    );
    assert_eq!(s.errors.interval_sum(), 0, "{text}");
    // A DG/VD neither form is an error that says so.
    let odd = read(f).replace("\"DG/VD\" : 0,", "\"DG/VD\" : \"zero\",");
    for c in ["show-all", "vall", "pds"] {
        s.answer(c, &odd);
    }
    let text = s.step(&mut m, 61.0);
    let ctl = controller_line(&text, "c1");
    assert!(
        ctl.contains("read_ok=false")
            && ctl.contains("VD LIST: a virtual drive row not understood (\\\"DG/VD\\\" \\\"zero\\\" is neither"),
        "{ctl}"
    );
}

/// perccli's "No Controller found" on a node without a controller: one line saying so (an
/// info state, no error), and the question asked less and less often.
#[test]
fn no_controller_found_is_a_state_and_backs_off() {
    let mut s = Stand::new();
    s.answer_file(
        "show-all",
        "canonical-perccli-call-show-no-controller-found.json",
    );
    let mut m = s.monitor(None);
    let text = s.step(&mut m, 1.0);
    assert_eq!(
        lines(&text, "raid_"),
        vec![
            "raid_controller,host=ds01,controller=none status=\"No Controller found\",vds=0i,vds_degraded=0i,vds_offline=0i,pds=0i,pds_failed=0i,bbu_present=false,read_ok=true,last_read_age_s=0i 1700000000000000000"
        ],
        "{text}"
    );
    assert_eq!(s.errors.interval_sum(), 0);
    let mut at = Vec::new();
    for t in (1..=20).map(|i| 1.0 + 60.0 * f64::from(i)) {
        let n = calls(&s).len();
        s.step(&mut m, t);
        if calls(&s).len() > n {
            at.push(t);
        }
    }
    assert_eq!(
        at,
        [121.0, 361.0, 841.0],
        "asked at 1, then after 2, 4, 8 intervals"
    );
    assert!(calls(&s).iter().all(|c| c == "/call show all J"));
}

/// `/call/vall show all J` is left out while `show all` lists the VDs and drives it did, the
/// last answer to it was good and no VD runs an operation; it is made again when a list
/// changes, and every tenth round whatever. `/call/eall/sall show all J` likewise while the
/// controller is healthy besides, and every fifth round.
#[test]
fn detail_calls_are_left_out_while_show_all_lists_the_same() {
    let mut s = Stand::new();
    let healthy = read("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    netdata(&s, &healthy);
    let mut m = s.monitor(None);
    let count = |s: &Stand, call: &str| calls(s).iter().filter(|c| c.starts_with(call)).count();
    let vall = |s: &Stand| count(s, "/call/vall ");
    let pds = |s: &Stand| count(s, "/call/eall/sall show all");
    let first = s.step(&mut m, 1.0);
    let second = s.step(&mut m, 61.0);
    // a healthy controller as it was: one call
    assert_eq!(calls(&s)[3..], ["/call show all J"]);
    // the VD and drive lines (members, risk, counters) are those of the round that read them
    assert_eq!(lines(&second, "raid_vd,"), lines(&first, "raid_vd,"));
    assert_eq!(lines(&second, "raid_pd,"), lines(&first, "raid_pd,"));
    assert!(
        controller_line(&second, "c0").contains("read_ok=true"),
        "{second}"
    );
    // a drive rebuilding changes `PD LIST` and `VD LIST`: both read again; then the VDs'
    // left out again, the drives' read every round while a VD is degraded
    rebuilding(&s);
    s.step(&mut m, 121.0);
    assert_eq!((vall(&s), pds(&s)), (2, 2));
    let mut now_s = 121.0;
    for _ in 1..detail::VDS_READ_EVERY {
        now_s += 60.0;
        s.step(&mut m, now_s);
    }
    let rounds = 2 + detail::VDS_READ_EVERY as usize;
    assert_eq!((vall(&s), pds(&s)), (2, rounds - 1), "{:?}", calls(&s));
    // the tenth round since it was read makes it
    now_s += 60.0;
    s.step(&mut m, now_s);
    assert_eq!(vall(&s), 3, "{:?}", calls(&s));

    // Healthy again, and as it was: the drives' call in the first round (the lists changed),
    // then in the fifth after it.
    netdata(&s, &healthy);
    let before = pds(&s);
    for _ in 0..2 * detail::PDS_READ_EVERY {
        now_s += 60.0;
        s.step(&mut m, now_s);
    }
    assert_eq!(pds(&s) - before, 2, "{:?}", calls(&s));

    // A VD running an operation: read every round.
    let mut s = Stand::new();
    let good = "cloudpods-c0-vall-show-all-7-vds-os-drive-name-wb-wt.json";
    for c in ["show-all", "pds"] {
        s.answer_file(c, good);
    }
    let busy = read(good).replacen(
        "\"Active Operations\" : \"None\"",
        "\"Active Operations\" : \"Background Initialization\"",
        1,
    );
    assert_ne!(busy, read(good));
    s.answer("vall", &busy);
    let mut m = s.monitor(None);
    for (round, now_s) in [1.0, 61.0, 121.0].into_iter().enumerate() {
        s.step(&mut m, now_s);
        assert_eq!(vall(&s), round + 1, "{:?}", calls(&s));
    }
    // the operation ends: the next round reads it, and the one after leaves it out
    s.answer_file("vall", good);
    s.step(&mut m, 181.0);
    s.step(&mut m, 241.0);
    assert_eq!(vall(&s), 4, "{:?}", calls(&s));
}
