//! Where a request's lines go: the database it names (v1 `db` + `rp`, v2 `bucket`, v3 `db`),
//! checked against the configuration, and carried with the lines in the queue.
//!
//! A request that names no database, or the database of an output (with no retention policy,
//! or the one that output is configured with), goes to the **default** target: each output
//! writes it to its own configured database or bucket, as the collector always did. Any other
//! name must be listed in `targets.allow` (`"telegraf"`, or `"telegraf/autogen"` for one
//! retention policy); its lines go to that database on every output. Anything else is refused
//! before a byte of the body is read, so a site's Telegraf cannot land in storwatch's database
//! by accident.
//!
//! In the queue a default-target record is the lines alone (the format of earlier releases, so
//! a queue written by them is read as it was). A record for a named target starts with a
//! header no line protocol can start with — the byte `0xFF` never occurs in UTF-8 text:
//!
//! ```text
//! 0xFF 'T' <db length: u8> <db> <rp length: u8> <rp> <lines>
//! ```

/// Longest database or retention policy name, in bytes (one length byte in the queue record).
pub const MAX_NAME_BYTES: usize = 255;

/// The first two bytes of a queue record that names its target.
const RECORD_MAGIC: [u8; 2] = [0xFF, b'T'];

/// Where lines go. An empty `db` is the default target: each output's own database.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Target {
    /// Database (v1, v3) or bucket (v2); empty for the default target.
    pub db: String,
    /// Retention policy (v1; on v2 the bucket is `db/rp`); empty for the default one.
    pub rp: String,
}

/// Why a request's target is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// A name no InfluxDB client would send (control characters, quotes, too long).
    #[error("invalid {what} name {name:?}: {reason}")]
    Invalid {
        what: &'static str,
        name: String,
        reason: &'static str,
    },
    /// A well-formed name the configuration does not allow.
    #[error(
        "database {0:?} is not allowed by this collector (its targets.allow lists the \
         databases it passes on; without a database lines go to the default one)"
    )]
    NotAllowed(String),
}

impl Target {
    /// The default target (each output's own database).
    pub fn default_target() -> Target {
        Target::default()
    }

    pub fn is_default(&self) -> bool {
        self.db.is_empty()
    }

    /// `db`, or `db/rp` with a retention policy (the v2 bucket name of a v1 database).
    pub fn name(&self) -> String {
        if self.rp.is_empty() {
            self.db.clone()
        } else {
            format!("{}/{}", self.db, self.rp)
        }
    }

    /// A `db` or `db/rp` name (a v2 bucket, an entry of `targets.allow`).
    pub fn parse(name: &str) -> Result<Target, TargetError> {
        let (db, rp) = name.split_once('/').unwrap_or((name, ""));
        let t = Target {
            db: db.to_string(),
            rp: rp.to_string(),
        };
        check_name("database", &t.db)?;
        if !t.rp.is_empty() {
            check_name("retention policy", &t.rp)?;
        }
        Ok(t)
    }

    /// The queue record of `lines` for this target: the lines alone for the default target,
    /// else the header, then the lines.
    pub fn record(&self, lines: bytes::Bytes) -> bytes::Bytes {
        if self.is_default() {
            return lines;
        }
        let mut out = Vec::with_capacity(4 + self.db.len() + self.rp.len() + lines.len());
        out.extend_from_slice(&RECORD_MAGIC);
        for s in [&self.db, &self.rp] {
            // Names are checked to fit one length byte when the target is made.
            let s = s.as_bytes().get(..MAX_NAME_BYTES).unwrap_or(s.as_bytes());
            out.push(s.len() as u8);
            out.extend_from_slice(s);
        }
        out.extend_from_slice(&lines);
        bytes::Bytes::from(out)
    }

    /// Splits a queue record into its target and its lines; `None` for a header that is cut
    /// short or not UTF-8 (the log's CRC makes that a bug, not damage).
    pub fn of_record(record: &[u8]) -> Option<(Target, &[u8])> {
        let Some(rest) = record.strip_prefix(&RECORD_MAGIC) else {
            return Some((Target::default(), record));
        };
        let (db, rest) = take_name(rest)?;
        let (rp, rest) = take_name(rest)?;
        if db.is_empty() {
            return None;
        }
        Some((Target { db, rp }, rest))
    }
}

fn take_name(b: &[u8]) -> Option<(String, &[u8])> {
    let (&len, rest) = b.split_first()?;
    let name = rest.get(..usize::from(len))?;
    let rest = rest.get(usize::from(len)..)?;
    Some((String::from_utf8(name.to_vec()).ok()?, rest))
}

/// A database or retention policy name as the collector passes it on: not empty, at most
/// [`MAX_NAME_BYTES`], no control characters (a newline would end a log line or a header), no
/// `"` or `\` (the name is quoted in `CREATE DATABASE`) and no `/` (it separates the retention
/// policy in a v2 bucket name).
fn check_name(what: &'static str, name: &str) -> Result<(), TargetError> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_NAME_BYTES {
        Some("longer than 255 bytes")
    } else if name.chars().any(char::is_control) {
        Some("control characters are not allowed")
    } else if name.contains(['"', '\\', '/']) {
        Some("'\"', '\\' and '/' are not allowed")
    } else {
        None
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(TargetError::Invalid {
            what,
            name: name.chars().take(300).collect(),
            reason,
        }),
    }
}

/// The databases requests may name: the outputs' own (the default target) and `targets.allow`.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    /// (database or bucket, retention policy) of each output: naming one is the default target.
    own: Vec<(String, String)>,
    allow: Vec<Target>,
}

impl Targets {
    /// From `targets.allow` and the outputs' own (database or bucket, retention policy).
    pub fn new(allow: &[String], own: Vec<(String, String)>) -> Result<Targets, TargetError> {
        let allow = allow
            .iter()
            .map(|a| Target::parse(a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Targets { own, allow })
    }

    /// The outputs' own (database or bucket, retention policy).
    pub fn own(&self) -> Vec<(String, String)> {
        self.own.clone()
    }

    /// The target of a request naming `db` and `rp` (v2: `db` is the bucket, `db/rp` allowed).
    pub fn resolve(&self, db: Option<&str>, rp: Option<&str>) -> Result<Target, TargetError> {
        let db = db.unwrap_or("");
        if db.is_empty() {
            return Ok(Target::default());
        }
        let mut t = Target::parse(db)?;
        match rp {
            Some(rp) if !rp.is_empty() => {
                if !t.rp.is_empty() {
                    return Err(TargetError::Invalid {
                        what: "retention policy",
                        name: rp.chars().take(300).collect(),
                        reason: "given twice (in the bucket and as rp)",
                    });
                }
                check_name("retention policy", rp)?;
                t.rp = rp.to_string();
            }
            _ => {}
        }
        let own = self
            .own
            .iter()
            .any(|(db, rp)| *db == t.db && (t.rp.is_empty() || *rp == t.rp));
        // The whole bucket name of a v2 output may hold a '/' itself.
        let own_bucket = self.own.iter().any(|(db, _)| *db == t.name());
        if own || own_bucket {
            return Ok(Target::default());
        }
        if self.allow.contains(&t) {
            return Ok(t);
        }
        Err(TargetError::NotAllowed(t.name()))
    }

    /// Whether a request may name database `db` at all (`CREATE DATABASE`).
    pub fn allows_db(&self, db: &str) -> Result<(), TargetError> {
        check_name("database", db)?;
        if self.own.iter().any(|(o, _)| o == db) || self.allow.iter().any(|t| t.db == db) {
            Ok(())
        } else {
            Err(TargetError::NotAllowed(db.to_string()))
        }
    }

    /// The retention policies a request may name for database `db` (`SHOW RETENTION
    /// POLICIES`), sorted, each once; `None` when `db` itself may not be named.
    pub fn retention_policies(&self, db: &str) -> Option<Vec<String>> {
        self.allows_db(db).ok()?;
        let mut v: Vec<String> = self
            .own
            .iter()
            .filter(|(d, rp)| d == db && !rp.is_empty())
            .map(|(_, rp)| rp.clone())
            .chain(
                self.allow
                    .iter()
                    .filter(|t| t.db == db && !t.rp.is_empty())
                    .map(|t| t.rp.clone()),
            )
            .collect();
        v.sort();
        v.dedup();
        Some(v)
    }

    /// Every database a request may name, sorted, each once (`SHOW DATABASES`).
    pub fn databases(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .own
            .iter()
            .map(|(db, _)| db.clone())
            .chain(self.allow.iter().map(|t| t.db.clone()))
            .filter(|d| !d.is_empty())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn targets() -> Targets {
        Targets::new(
            &["telegraf".into(), "site/rp_1m".into()],
            vec![("storwatch".into(), String::new())],
        )
        .unwrap()
    }

    #[test]
    fn requests_resolve_to_the_default_an_allowed_database_or_a_refusal() {
        let t = targets();
        assert_eq!(t.resolve(None, None), Ok(Target::default()));
        assert_eq!(t.resolve(Some(""), Some("x")), Ok(Target::default()));
        assert_eq!(t.resolve(Some("storwatch"), None), Ok(Target::default()));
        assert_eq!(
            t.resolve(Some("telegraf"), None).unwrap(),
            Target {
                db: "telegraf".into(),
                rp: String::new()
            }
        );
        // a v2 bucket "db/rp" and v1 db + rp are the same target
        let a = t.resolve(Some("site/rp_1m"), None).unwrap();
        assert_eq!(t.resolve(Some("site"), Some("rp_1m")).unwrap(), a);
        assert_eq!(a.name(), "site/rp_1m");
        assert_eq!(
            t.resolve(Some("site"), None),
            Err(TargetError::NotAllowed("site".into()))
        );
        assert_eq!(
            t.resolve(Some("telegraf"), Some("other")),
            Err(TargetError::NotAllowed("telegraf/other".into()))
        );
        assert!(matches!(
            t.resolve(Some("storwatch"), Some("elsewhere")),
            Err(TargetError::NotAllowed(_))
        ));
        assert_eq!(t.databases(), ["site", "storwatch", "telegraf"]);
        assert_eq!(t.retention_policies("site"), Some(vec!["rp_1m".into()]));
        assert_eq!(t.retention_policies("telegraf"), Some(vec![]));
        assert_eq!(t.retention_policies("other"), None);
    }

    #[test]
    fn hostile_names_are_invalid_not_allowed() {
        let t = targets();
        for bad in [
            "a\"b",
            "a\nb",
            "a\rb",
            "a\\b",
            "tele\0graf",
            "x/y/z",
            "/x",
            "\u{1b}[31m",
        ] {
            assert!(
                matches!(t.resolve(Some(bad), None), Err(TargetError::Invalid { .. })),
                "{bad:?}"
            );
        }
        let long = "d".repeat(256);
        assert!(matches!(
            t.resolve(Some(&long), None),
            Err(TargetError::Invalid { .. })
        ));
        assert!(matches!(
            t.resolve(Some("site/a"), Some("b")),
            Err(TargetError::Invalid { .. })
        ));
        assert!(Targets::new(&["bad\"name".into()], vec![]).is_err());
    }

    #[test]
    fn records_carry_their_target_and_old_records_are_the_default() {
        let lines = bytes::Bytes::from_static(b"m v=1 1\n");
        // The default target's record is the lines alone: the format of earlier releases.
        assert_eq!(Target::default().record(lines.clone()), lines);
        assert_eq!(
            Target::of_record(b"m v=1 1\n"),
            Some((Target::default(), &b"m v=1 1\n"[..]))
        );
        let t = Target {
            db: "telegraf".into(),
            rp: "autogen".into(),
        };
        let rec = t.record(lines.clone());
        assert_eq!(&rec[..2], &[0xFF, b'T']);
        assert_eq!(Target::of_record(&rec), Some((t, &b"m v=1 1\n"[..])));
        let t = Target {
            db: "d".repeat(255),
            rp: String::new(),
        };
        assert_eq!(Target::of_record(&t.record(lines)).unwrap().0, t);
        // cut short or empty: refused, never a panic
        for bad in [
            &[0xFF, b'T'][..],
            &[0xFF, b'T', 5, b'a'],
            &[0xFF, b'T', 1, b'a'],
            &[0xFF, b'T', 0, 0],
            &[0xFF, b'T', 1, 0xFF, 0],
        ] {
            assert_eq!(Target::of_record(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn records_and_names_never_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..300), name in "(?s).{0,300}") {
            let mut rec = vec![0xFF, b'T'];
            rec.extend_from_slice(&b);
            let _ = Target::of_record(&rec);
            let _ = Target::of_record(&b);
            let _ = targets().resolve(Some(&name), Some(&name));
            if let Ok(t) = Target::parse(&name) {
                let rec = t.record(bytes::Bytes::from_static(b"m v=1 1\n"));
                let back = Target::of_record(&rec);
                proptest::prop_assert_eq!(back.map(|(t, _)| t), Some(t));
            }
        }
    }
}
