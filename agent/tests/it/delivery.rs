//! Delivery: the HTTP sink and its spool against small in-test HTTP servers, for the answers
//! InfluxDB 1.x cannot give (429 with Retry-After, v2/v3 error shapes, 401), a server that never
//! answers, a damaged spool and mutual TLS. The same sink against a real InfluxDB is in
//! `tests/tests/it/agent_delivery_influxdb.rs` (crate `storwatch-tests`): `cargo test -p
//! storwatch-agent` needs no InfluxDB.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storwatch_agent::sink::http::{
    HttpConfig, HttpSink, REQUEST_BUFFER_BYTES, RESPONSE_BUFFER_BYTES,
};
use storwatch_agent::sink::spool::Spool;
use storwatch_agent::sink::Sink;
use storwatch_test_support::http::{
    answer, no_decision, read_request, write_answer, Answer, FakeServer, Seen,
};
use storwatch_test_support::pki;
use storwatch_test_support::reports::{report, T0};
use storwatch_test_support::wait_until;
use storwatch_wire::log::{RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};

/// Settings that keep the tests fast: short timeouts and backoff.
fn fast_config(spool_dir: &Path) -> HttpConfig {
    HttpConfig {
        spool_dir: spool_dir.to_owned(),
        timeout_s: 2.0,
        backoff_min_s: 0.05,
        backoff_max_s: 0.2,
        ..HttpConfig::default()
    }
}

/// Lines of every request the server accepted with a 2xx, in order.
fn bodies(reqs: &[Seen]) -> Vec<u8> {
    reqs.iter().flat_map(|r| r.body.clone()).collect()
}

#[test]
fn too_many_requests_waits_for_retry_after() {
    let busy = Answer {
        status: 429,
        headers: vec![("Retry-After", "1".into())],
        body: r#"{"code":"too many requests"}"#.into(),
    };
    let server = FakeServer::start(vec![busy], no_decision());
    let spool = tempfile::tempdir().unwrap();
    let url = format!("{}/api/v2/write?org=o&bucket=b", server.url_base);
    let mut s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    s.send(&report(T0, 2)).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    // the backoff alone would retry after at most 0.2 s
    assert!(gap >= Duration::from_millis(950), "{gap:?}");
    assert!(gap < Duration::from_secs(3), "{gap:?}");
    assert_eq!(reqs[1].body, report(T0, 2));
    assert_eq!(s.delivery_stats().last_status, 204);
}

/// The client's buffers are smaller than ureq's defaults: a report ten times the request buffer
/// goes out whole, an error text larger than the response buffer is read, and an answer whose
/// head does not fit in the response buffer is a failed request, the report sent again.
#[test]
fn reports_and_answers_larger_than_the_clients_buffers() {
    let long_text = answer(500, &"x".repeat(100 << 10));
    let long_head = Answer {
        status: 204,
        headers: vec![("X-Padding", "p".repeat(RESPONSE_BUFFER_BYTES))],
        body: String::new(),
    };
    let server = FakeServer::start(vec![long_text, long_head], no_decision());
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        gzip: false,
        ..fast_config(spool.path())
    };
    let url = format!("{}/write?db=x", server.url_base);
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    let big = report(T0, 10 * REQUEST_BUFFER_BYTES / 20);
    assert!(big.len() > 10 * REQUEST_BUFFER_BYTES, "{}", big.len());
    s.send(&big).unwrap();
    assert!(s.wait_drained(Duration::from_secs(10)));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert!(r.body == big, "a request's body is not the report");
    }
    let stats = s.delivery_stats();
    assert_eq!((stats.failed_requests, stats.last_status), (2, 204));
}

#[test]
fn partial_write_drops_only_the_named_lines() {
    let partial = answer(
        400,
        r#"{"error":"partial write of line protocol occurred","data":[{"original_line":"m,host=x v=","line_number":3,"error_message":"invalid field value"}]}"#,
    );
    let server = FakeServer::start(vec![partial], no_decision());
    let spool = tempfile::tempdir().unwrap();
    let url = format!("{}/api/v3/write_lp?db=x", server.url_base);
    let mut s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    let mut first = report(T0, 2);
    first.extend_from_slice(b"m,host=x v=\n");
    s.send(&first).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    s.send(&report(T0 + 1, 2)).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    let reqs = server.requests();
    // the partially written batch is not sent again
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body, first);
    assert_eq!(reqs[1].body, report(T0 + 1, 2));
    let d = s.delivery_stats();
    assert_eq!((d.rejected_lines, d.delivered_lines), (1, 4), "{d:?}");
    assert_eq!(s.stats().dropped_lines, 1);
}

#[test]
fn whole_batch_refusal_is_narrowed_to_the_bad_record() {
    let server = FakeServer::start(
        Vec::new(),
        Box::new(|req: &Seen| {
            let text = String::from_utf8_lossy(&req.body);
            text.contains("host=bad").then(|| {
                answer(
                    400,
                    r#"{"code":"invalid","message":"failed to parse line protocol"}"#,
                )
            })
        }),
    );
    let spool = tempfile::tempdir().unwrap();
    // a backlog of three reports, the middle one refused by the server
    {
        let mut sp = Spool::open(spool.path(), 1 << 20).unwrap();
        sp.append(&report(T0, 2)).unwrap();
        sp.append(format!("m,host=bad v=1i {T0}\n").as_bytes())
            .unwrap();
        sp.append(&report(T0 + 1, 2)).unwrap();
    }
    let url = format!("{}/api/v2/write?org=o&bucket=b", server.url_base);
    let s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    let reqs = server.requests();
    let ok: Vec<Seen> = reqs
        .iter()
        .filter(|r| !String::from_utf8_lossy(&r.body).contains("host=bad"))
        .cloned()
        .collect();
    assert_eq!(bodies(&ok), [report(T0, 2), report(T0 + 1, 2)].concat());
    // whole batch, then one record at a time: 1 + 3 requests
    assert_eq!(reqs.len(), 4, "{reqs:?}");
    let d = s.delivery_stats();
    assert_eq!((d.rejected_lines, d.delivered_lines), (1, 4), "{d:?}");
}

#[test]
fn unauthorized_keeps_data_until_the_token_is_fixed() {
    let server = FakeServer::start(
        Vec::new(),
        Box::new(|req: &Seen| {
            (req.headers.get("authorization").map(String::as_str) != Some("Token good-token")).then(
                || {
                    answer(
                        401,
                        r#"{"code":"unauthorized","message":"unauthorized access"}"#,
                    )
                },
            )
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "stale-token\n").unwrap();
    let cfg = HttpConfig {
        token_file: Some(token.clone()),
        ..fast_config(&dir.path().join("spool"))
    };
    let url = format!("{}/write?db=x", server.url_base);
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    s.send(&report(T0, 3)).unwrap();
    wait_until("three refusals", Duration::from_secs(5), || {
        server.requests().len() >= 3
    });
    let d = s.delivery_stats();
    assert_eq!(d.last_status, 401);
    assert_eq!(d.spool.pending_lines, 3);
    assert_eq!(s.stats().dropped_lines, 0);
    // the operator fixes the token file; the sink picks it up on the next refusal
    std::fs::write(&token, "good-token\n").unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    let reqs = server.requests();
    let last = reqs.last().unwrap();
    assert_eq!(last.body, report(T0, 3));
    assert_eq!(last.headers.get("content-encoding").unwrap(), "gzip");
    assert!(last.headers["user-agent"].starts_with("storwatch-agent/"));
    assert!(reqs[0].headers["authorization"] == "Token stale-token");
}

#[test]
fn corrupt_spool_on_restart_delivers_the_intact_records() {
    let server = FakeServer::start(Vec::new(), no_decision());
    let spool = tempfile::tempdir().unwrap();
    let records = [report(T0, 2), report(T0 + 1, 3), report(T0 + 2, 2)];
    {
        let mut sp = Spool::open(spool.path(), 1 << 20).unwrap();
        for r in &records {
            sp.append(r).unwrap();
        }
    }
    // flip a payload byte of the middle record
    let seg = std::fs::read_dir(spool.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = (SEGMENT_HEADER_BYTES + 2 * RECORD_HEADER_BYTES) as usize + records[0].len() + 5;
    bytes[at] ^= 0x20;
    // and leave a torn record at the end, as a crash mid-append would
    bytes.extend_from_slice(b"SWR1\x40\x00\x00\x00\x00\x00");
    std::fs::write(&seg, bytes).unwrap();

    let url = format!("{}/write?db=x", server.url_base);
    let s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    assert_eq!(
        bodies(&server.requests()),
        [records[0].clone(), records[2].clone()].concat()
    );
    let d = s.delivery_stats();
    assert_eq!((d.spool.corrupt_records, d.spool.corrupt_lines), (1, 3));
    assert_eq!(d.spool.torn_bytes, 10);
    assert_eq!(s.stats().dropped_lines, 3);
}

#[test]
fn a_server_that_never_answers_does_not_block_send() {
    // accepts connections and never replies
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/write?db=x", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        timeout_s: 1.0,
        ..fast_config(spool.path())
    };
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let t = Instant::now();
        s.send(&report(T0 + i, 50)).unwrap();
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    // an append plus fdatasync; far below the 1 s request timeout the worker is stuck in
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    assert_eq!(s.delivery_stats().spool.pending_lines, 20 * 50);
    assert!(!held.lock().unwrap().is_empty());
}

#[test]
fn full_spool_drops_the_oldest_and_counts_it() {
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        spool_max_bytes: 64 << 10,
        ..fast_config(spool.path())
    };
    // nothing listens on port 9 of loopback: connection refused
    let mut s = HttpSink::open("http://127.0.0.1:9/write?db=x", &cfg).unwrap();
    let total = 400;
    for i in 0..total {
        s.send(&report(T0 + i, 5)).unwrap();
    }
    assert!(s.wait_spooled(Duration::from_secs(60)));
    let st = s.stats();
    let d = s.delivery_stats();
    assert!(d.spool.file_bytes <= 64 << 10, "{d:?}");
    assert!(st.dropped_lines > 0);
    assert_eq!(st.dropped_lines + d.spool.pending_lines, total as u64 * 5);
}

/// An HTTPS server that demands a client certificate signed by the test CA; answers 204.
fn start_mtls_server(dir: &Path) -> (String, Arc<Mutex<Vec<Seen>>>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // a failed handshake surfaces here as a read error: the request is simply not seen
            let Some(req) = read_request(&mut tls) else {
                continue;
            };
            seen.lock().unwrap().push(req);
            write_answer(&mut tls, &answer(204, ""));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (base, requests)
}

#[test]
fn https_with_a_site_ca_and_a_client_certificate() {
    let pki = tempfile::tempdir().unwrap();
    pki::make_site(pki.path());
    let (base, requests) = start_mtls_server(pki.path());
    let url = format!("{base}/write?db=x");
    let p = |f: &str| Some(pki.path().join(f));

    // without a client certificate the server refuses the handshake: data kept, retried
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        ca_file: p("ca.pem"),
        ..fast_config(spool.path())
    };
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    s.send(&report(T0, 2)).unwrap();
    wait_until("refused handshakes", Duration::from_secs(5), || {
        s.delivery_stats().failed_requests >= 2
    });
    assert_eq!(s.delivery_stats().spool.pending_lines, 2);
    drop(s);

    // the built-in roots do not know the site CA either
    let cfg = HttpConfig {
        client_cert_file: p("agent.pem"),
        client_key_file: p("agent.key"),
        ..fast_config(spool.path())
    };
    let s = HttpSink::open(&url, &cfg).unwrap();
    wait_until("untrusted server", Duration::from_secs(5), || {
        s.delivery_stats().failed_requests >= 2
    });
    assert_eq!(s.delivery_stats().spool.pending_lines, 2);
    drop(s);
    assert!(requests.lock().unwrap().is_empty());

    // site CA and client certificate: the spooled report goes through
    let cfg = HttpConfig {
        ca_file: p("ca.pem"),
        client_cert_file: p("agent.pem"),
        client_key_file: p("agent.key"),
        ..fast_config(spool.path())
    };
    let s = HttpSink::open(&url, &cfg).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    let reqs = requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body, report(T0, 2));
}
