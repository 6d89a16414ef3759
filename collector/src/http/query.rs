//! `/query`: what InfluxDB clients ask before they write. Telegraf's influxdb output sends
//! `CREATE DATABASE "telegraf"` first, the influx CLI and the Python clients `CREATE DATABASE`
//! and `SHOW DATABASES`; a 404 there stops some of them before their first write.
//!
//! * `CREATE DATABASE name [WITH …]`: allowed when a write to `name` would be (an output's
//!   own database or one in `targets.allow`), else 403. Nothing is created here: a v1 output
//!   creates the database on the first write for it (see `forward`), 3.x does by itself; the
//!   `WITH` options (retention) are the backend's business and are ignored.
//! * `SHOW DATABASES`: the databases a request may name.
//! * `SHOW RETENTION POLICIES [ON db]` (without `ON`, the `db` parameter): the retention
//!   policies a request may name for `db` — those `targets.allow` lists as `db/rp` — by name
//!   only (durations are the backend's); the influx CLI asks it for `use db.rp`.
//! * anything else: 400 naming what the collector answers — it stores nothing it could query.
//!
//! GET or POST, `q` in the URL or a form-encoded body, several statements separated by `;`;
//! the answer has InfluxDB 1.x's shape: `{"results":[{"statement_id":0,…},…]}`. Credentials
//! as on `/write` (`u`/`p`, `Authorization: Token`/`Bearer`, Basic).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde::Deserialize;
use storwatch_wire::lp::Api;

use super::answer::{error, printable};
use super::write::{authenticate, refused_target};
use super::AppState;

/// Longest `q`, and longest form body, in bytes. Clients send a statement of a few dozen
/// bytes; a longer one is not for the collector.
pub(super) const MAX_QUERY_BYTES: usize = 16 << 10;

/// Parameters of `/query` (in the URL, or the form-encoded body of a POST).
#[derive(Debug, Default, Deserialize)]
pub(super) struct QueryParams {
    q: Option<String>,
    #[allow(dead_code)]
    u: Option<String>,
    p: Option<String>,
    /// The database of `SHOW RETENTION POLICIES` without `ON`.
    db: Option<String>,
}

/// A statement the collector answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Statement {
    CreateDatabase(String),
    ShowDatabases,
    /// `SHOW RETENTION POLICIES [ON db]` (the influx CLI's `use db.rp` asks it).
    ShowRetentionPolicies(Option<String>),
}

pub(super) async fn query(
    State(st): State<Arc<AppState>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let m = &st.metrics;
    m.query_requests.fetch_add(1, Ordering::Relaxed);
    // Read here rather than by axum's `Query`, whose refusal is plain text, not InfluxDB's JSON.
    let url: QueryParams = match serde_urlencoded::from_str(raw.as_deref().unwrap_or("")) {
        Ok(p) => p,
        Err(e) => {
            return error(
                Api::V1,
                StatusCode::BAD_REQUEST,
                "invalid",
                &format!("cannot read the query string: {e}"),
            )
        }
    };
    let form = match read_form(&st, &headers, body).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    // A parameter of the URL wins over the body's, as in InfluxDB's `r.FormValue`.
    let q = url.q.or(form.q);
    let p = url.p.or(form.p);
    let db = url.db.or(form.db);
    let Some(name) = authenticate(&st, &headers, p.as_deref()) else {
        m.unauthorized.fetch_add(1, Ordering::Relaxed);
        return error(
            Api::V1,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unauthorized access",
        );
    };
    let q = q.unwrap_or_default();
    if q.len() > MAX_QUERY_BYTES {
        return error(
            Api::V1,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
            &format!("query longer than {MAX_QUERY_BYTES} bytes"),
        );
    }
    let statements = match parse(&q) {
        Ok(s) if s.is_empty() => {
            return error(
                Api::V1,
                StatusCode::BAD_REQUEST,
                "invalid",
                "missing required parameter \"q\"",
            )
        }
        Ok(s) => s,
        Err(msg) => {
            tracing::info!(client = %name, query = %printable(&q), "query refused");
            return error(
                Api::V1,
                StatusCode::BAD_REQUEST,
                "invalid",
                &format!("error parsing query: {msg}"),
            );
        }
    };
    let targets = st.targets();
    let mut results = Vec::with_capacity(statements.len());
    for (id, s) in statements.iter().enumerate() {
        match s {
            Statement::CreateDatabase(db) => {
                if let Err(e) = targets.allows_db(db) {
                    m.target_refused.fetch_add(1, Ordering::Relaxed);
                    return refused_target(Api::V1, &e);
                }
                results.push(serde_json::json!({ "statement_id": id }));
            }
            Statement::ShowDatabases => {
                let values: Vec<_> = targets
                    .databases()
                    .into_iter()
                    .map(|d| serde_json::json!([d]))
                    .collect();
                let mut series = serde_json::json!({"name": "databases", "columns": ["name"]});
                // InfluxDB leaves `values` out when there are none.
                if !values.is_empty() {
                    series["values"] = serde_json::Value::Array(values);
                }
                results.push(serde_json::json!({ "statement_id": id, "series": [series] }));
            }
            Statement::ShowRetentionPolicies(on) => {
                // InfluxDB's answers: a statement error, the request itself succeeds.
                let Some(db) = on.as_deref().or(db.as_deref()).filter(|d| !d.is_empty()) else {
                    results.push(
                        serde_json::json!({ "statement_id": id, "error": "database name required" }),
                    );
                    continue;
                };
                let Some(rps) = targets.retention_policies(db) else {
                    results.push(serde_json::json!({
                        "statement_id": id,
                        "error": format!("database not found: {}", printable(db)),
                    }));
                    continue;
                };
                let mut series = serde_json::json!({"columns": ["name"]});
                if !rps.is_empty() {
                    series["values"] = serde_json::Value::Array(
                        rps.into_iter().map(|r| serde_json::json!([r])).collect(),
                    );
                }
                results.push(serde_json::json!({ "statement_id": id, "series": [series] }));
            }
        }
    }
    let mut r = (
        StatusCode::OK,
        axum::Json(serde_json::json!({ "results": results })),
    )
        .into_response();
    r.headers_mut().insert(
        "X-Influxdb-Version",
        header::HeaderValue::from_static(concat!(
            "storwatch-collector-",
            env!("CARGO_PKG_VERSION")
        )),
    );
    r
}

/// The form-encoded body of a POST (empty for GET, or a body of another type), read within
/// [`MAX_QUERY_BYTES`] and the body timeout.
async fn read_form(
    st: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<QueryParams, Response> {
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        });
    let timeout = Duration::from_secs(st.limits().body_timeout_s.max(1));
    let read = async {
        let mut buf = Vec::new();
        let mut body = body;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(StatusCode::BAD_REQUEST);
            };
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > MAX_QUERY_BYTES {
                    return Err(StatusCode::PAYLOAD_TOO_LARGE);
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf)
    };
    let buf = match tokio::time::timeout(timeout, read).await {
        Ok(Ok(b)) => b,
        Ok(Err(StatusCode::PAYLOAD_TOO_LARGE)) => {
            return Err(error(
                Api::V1,
                StatusCode::PAYLOAD_TOO_LARGE,
                "request too large",
                &format!("query body larger than {MAX_QUERY_BYTES} bytes"),
            ))
        }
        Ok(Err(_)) => {
            return Err(error(
                Api::V1,
                StatusCode::BAD_REQUEST,
                "invalid",
                "cannot read the body",
            ))
        }
        Err(_) => {
            return Err(error(
                Api::V1,
                StatusCode::REQUEST_TIMEOUT,
                "request timeout",
                &format!("body not received within {} s", timeout.as_secs()),
            ))
        }
    };
    if !is_form || buf.is_empty() {
        return Ok(QueryParams::default());
    }
    serde_urlencoded::from_bytes(&buf).map_err(|e| {
        error(
            Api::V1,
            StatusCode::BAD_REQUEST,
            "invalid",
            &format!("cannot read the form body: {e}"),
        )
    })
}

/// A token of InfluxQL, as far as the statements answered here need it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A bare word: keyword or identifier.
    Word(String),
    /// A double-quoted identifier, unescaped.
    Quoted(String),
    /// Anything else (strings, numbers with signs, operators): only its text, for errors.
    Other(String),
    Semicolon,
}

/// Splits `q` into tokens; an unterminated quote is an error.
fn tokens(q: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = q.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == ';' {
            chars.next();
            out.push(Token::Semicolon);
        } else if c == '"' || c == '\'' {
            chars.next();
            let mut s = String::new();
            let mut closed = false;
            while let Some(d) = chars.next() {
                match d {
                    '\\' => {
                        if let Some(e) = chars.next() {
                            s.push(e);
                        }
                    }
                    d if d == c => {
                        closed = true;
                        break;
                    }
                    d => s.push(d),
                }
            }
            if !closed {
                return Err(format!(
                    "unterminated quoted {}",
                    if c == '"' { "identifier" } else { "string" }
                ));
            }
            out.push(if c == '"' {
                Token::Quoted(s)
            } else {
                Token::Other(format!("'{s}'"))
            });
        } else if c.is_alphanumeric() || c == '_' {
            let mut s = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    s.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(Token::Word(s));
        } else {
            chars.next();
            out.push(Token::Other(c.to_string()));
        }
    }
    Ok(out)
}

/// The statements of `q`, or why the collector does not answer it.
pub(super) fn parse(q: &str) -> Result<Vec<Statement>, String> {
    let toks = tokens(q)?;
    let mut out = Vec::new();
    for stmt in toks.split(|t| *t == Token::Semicolon) {
        if stmt.is_empty() {
            continue;
        }
        let kw = |i: usize, want: &str| matches!(stmt.get(i), Some(Token::Word(w)) if w.eq_ignore_ascii_case(want));
        if kw(0, "CREATE") && kw(1, "DATABASE") {
            let name = match stmt.get(2) {
                Some(Token::Word(w)) | Some(Token::Quoted(w)) => w.clone(),
                _ => return Err("CREATE DATABASE needs a database name".into()),
            };
            if stmt.len() > 3 && !kw(3, "WITH") {
                return Err(format!(
                    "unexpected {} after CREATE DATABASE {name:?}",
                    describe(stmt.get(3))
                ));
            }
            out.push(Statement::CreateDatabase(name));
        } else if kw(0, "SHOW") && kw(1, "DATABASES") && stmt.len() == 2 {
            out.push(Statement::ShowDatabases);
        } else if kw(0, "SHOW") && kw(1, "RETENTION") && kw(2, "POLICIES") {
            let on = match (stmt.get(3), stmt.get(4), stmt.len()) {
                (None, _, _) => None,
                (Some(_), Some(Token::Word(w) | Token::Quoted(w)), 5) if kw(3, "ON") => {
                    Some(w.clone())
                }
                _ => return Err("SHOW RETENTION POLICIES takes only ON <database>".into()),
            };
            out.push(Statement::ShowRetentionPolicies(on));
        } else {
            let head: Vec<String> = stmt.iter().take(2).map(|t| describe(Some(t))).collect();
            return Err(format!(
                "the storwatch collector answers CREATE DATABASE, SHOW DATABASES and SHOW \
                 RETENTION POLICIES only, not {}; query the InfluxDB behind it",
                head.join(" ")
            ));
        }
    }
    Ok(out)
}

fn describe(t: Option<&Token>) -> String {
    let text = match t {
        Some(Token::Word(w)) => w.to_ascii_uppercase(),
        Some(Token::Quoted(w)) => format!("\"{w}\""),
        Some(Token::Other(o)) => o.clone(),
        Some(Token::Semicolon) => ";".into(),
        None => "the end".into(),
    };
    printable(&text.chars().take(64).collect::<String>()).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn what_clients_send_before_writing() {
        // Telegraf's influxdb output
        assert_eq!(
            parse("CREATE DATABASE \"telegraf\"").unwrap(),
            [Statement::CreateDatabase("telegraf".into())]
        );
        // influxdb-python's create_database, with a quote escaped
        assert_eq!(
            parse("create database \"a\\\"b\"").unwrap(),
            [Statement::CreateDatabase("a\"b".into())]
        );
        assert_eq!(
            parse(" CREATE DATABASE site WITH DURATION 30d ; show databases;").unwrap(),
            [
                Statement::CreateDatabase("site".into()),
                Statement::ShowDatabases
            ]
        );
        assert!(parse(" ; ").unwrap().is_empty());
        // the influx CLI's `use db.rp`
        assert_eq!(
            parse("SHOW RETENTION POLICIES ON \"site\"").unwrap(),
            [Statement::ShowRetentionPolicies(Some("site".into()))]
        );
        assert_eq!(
            parse("show retention policies").unwrap(),
            [Statement::ShowRetentionPolicies(None)]
        );
    }

    #[test]
    fn everything_else_is_named_in_a_clear_error() {
        for (q, want) in [
            ("SELECT * FROM cpu", "not SELECT *"),
            ("DROP DATABASE storwatch", "not DROP DATABASE"),
            ("SHOW DATABASES extra", "not SHOW DATABASES"),
            ("CREATE DATABASE", "needs a database name"),
            ("CREATE DATABASE x; DROP DATABASE y", "not DROP DATABASE"),
            ("CREATE DATABASE x y", "unexpected Y"),
            ("SHOW RETENTION POLICIES ON", "takes only ON"),
            ("SHOW RETENTION POLICIES ON a b", "takes only ON"),
            ("SHOW RETENTION", "not SHOW RETENTION"),
            ("CREATE DATABASE \"x", "unterminated"),
            ("SHOW \u{1b}[31m", "\\u{1b}"),
        ] {
            let e = parse(q).unwrap_err();
            assert!(e.contains(want), "{q:?}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(q in "(?s).{0,200}", kw in "(CREATE DATABASE|SHOW DATABASES|;|\"|'|\\\\)") {
            let _ = parse(&q);
            let _ = parse(&format!("{kw}{q}"));
            let _ = parse(&format!("CREATE DATABASE {q}"));
        }
    }
}
