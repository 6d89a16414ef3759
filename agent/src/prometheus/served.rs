//! The page as served: made from the exposition when a scrape asks for it, shared by every scrape
//! of the same report while one is sending it, and let go [`PAGE_KEPT`] after the last one is
//! done.
//!
//! The page is the largest thing the agent holds with `/metrics` on (~1.3 MB at 200 disks, ten
//! times the heap of its series' values), and a scrape needs it for the few milliseconds of its
//! sending, once every scrape interval. Kept from one report to the next it was resident all the
//! time; made when asked, it is resident only while it is sent. A scrape that comes while the
//! page of the same report is still kept (another Prometheus of an HA pair, or a scrape flood)
//! gets that page: a page is made at most once for each report and [`PAGE_KEPT`] of idleness,
//! whatever the number of scrapes.
//!
//! The listener's thread makes it, holding the exposition's lock for the making (a few
//! milliseconds, 6.7 M instructions at 200 disks): the sampling thread, which takes the same lock
//! to hand in a report, waits at most that long, and only when a page is being made at that
//! moment. Neither waits for a client: the lock is never held across I/O.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::exposition::Exposition;
use super::http::{answer_in, Answer};

/// How long a page no scrape is sending is kept for the next scrape of the same report.
pub const PAGE_KEPT: Duration = Duration::from_secs(1);

/// What the listener makes the page from, shared with the sampling thread that hands in the
/// reports ([`Source::take_report`]).
#[derive(Debug, Default)]
pub(super) struct Source {
    exposition: Mutex<Exposition>,
    /// Reports taken in so far: a page made since the last one is that report's.
    reports: AtomicU64,
}

impl Source {
    /// Takes in a report (line protocol).
    pub(super) fn take_report(&self, report: &str) {
        let mut exposition = self
            .exposition
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        exposition.update(report);
        self.reports.fetch_add(1, Ordering::Release);
    }
}

/// The page kept for the scrapes, if any.
#[derive(Debug, Default)]
pub(super) struct Served {
    page: Option<Kept>,
    /// The last page's length: the next one is made in a buffer that holds it.
    last_len: usize,
    /// Pages made: what the tests count.
    #[cfg(test)]
    pub(super) made: u64,
}

#[derive(Debug)]
struct Kept {
    answer: Arc<Answer>,
    /// The report it was made from ([`Source::reports`] then).
    report: u64,
    /// Since when no scrape holds it.
    idle_since: Option<Instant>,
}

impl Served {
    /// The page of the latest report: the kept one if it is that report's, else one made now.
    pub(super) fn page(&mut self, source: &Source) -> Arc<Answer> {
        let latest = source.reports.load(Ordering::Acquire);
        if let Some(kept) = self.page.as_mut().filter(|k| k.report == latest) {
            kept.idle_since = None;
            return Arc::clone(&kept.answer);
        }
        let mut exposition = source
            .exposition
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // under the lock: no report comes in while the page is made, so it is this one's
        let report = source.reports.load(Ordering::Acquire);
        let room = Vec::with_capacity(self.last_len + (64 << 10));
        let answer = Arc::new(answer_in(room, |out| exposition.render_into(out)));
        drop(exposition);
        self.last_len = answer.as_bytes().len();
        #[cfg(test)]
        {
            self.made += 1;
        }
        self.page = Some(Kept {
            answer: Arc::clone(&answer),
            report,
            idle_since: None,
        });
        answer
    }

    /// Lets the page go once no scrape has held it for [`PAGE_KEPT`]; when to call again (the
    /// moment it would go), if a page is kept.
    pub(super) fn tidy(&mut self, now: Instant) -> Option<Instant> {
        let kept = self.page.as_mut()?;
        if Arc::strong_count(&kept.answer) > 1 {
            // being sent: each connection's deadline wakes the loop
            kept.idle_since = None;
            return None;
        }
        let since = *kept.idle_since.get_or_insert(now);
        let until = since + PAGE_KEPT;
        if now >= until {
            self.page = None;
            return None;
        }
        Some(until)
    }

    /// Whether a page is kept.
    #[cfg(test)]
    pub(super) fn holds_page(&self) -> bool {
        self.page.is_some()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn text(a: &Answer) -> String {
        String::from_utf8_lossy(a.as_bytes()).into_owned()
    }

    #[test]
    fn a_page_is_made_when_asked_shared_while_sent_and_let_go_when_idle() {
        let source = Source::default();
        let mut served = Served::default();
        let t0 = Instant::now();
        source.take_report("disk,device=sda util_pct=1 1\n");
        assert_eq!(served.made, 0, "no page before a scrape asks");
        assert_eq!(served.tidy(t0), None);

        // two scrapes of one report: one page
        let first = served.page(&source);
        let again = served.page(&source);
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(served.made, 1);
        assert!(text(&first).ends_with("storwatch_disk_util_percent{device=\"sda\"} 1\n"));

        // a new report while the first page is sent: the next scrape gets a new page, the one
        // being sent is left as it was
        source.take_report("disk,device=sda util_pct=2 2\n");
        let second = served.page(&source);
        assert_eq!(served.made, 2);
        assert!(text(&first).ends_with("{device=\"sda\"} 1\n"));
        assert!(text(&second).ends_with("{device=\"sda\"} 2\n"));
        drop((first, again));

        // held: kept whatever the time
        assert_eq!(served.tidy(t0), None);
        assert_eq!(served.tidy(t0 + 10 * PAGE_KEPT), None);
        assert!(served.holds_page());
        drop(second);

        // idle: kept PAGE_KEPT from when it was first seen idle, and served meanwhile
        let t1 = t0 + Duration::from_secs(60);
        assert_eq!(served.tidy(t1), Some(t1 + PAGE_KEPT));
        let third = served.page(&source);
        assert_eq!(served.made, 2, "the kept page of the same report");
        drop(third);
        let t2 = t1 + PAGE_KEPT / 2;
        assert_eq!(served.tidy(t2), Some(t2 + PAGE_KEPT), "idle again from t2");
        assert_eq!(served.tidy(t2 + PAGE_KEPT / 2), Some(t2 + PAGE_KEPT));
        assert!(served.holds_page());
        assert_eq!(served.tidy(t2 + PAGE_KEPT), None);
        assert!(!served.holds_page());

        // gone: the next scrape makes it again, the same page
        let fourth = served.page(&source);
        assert_eq!(served.made, 3);
        let mut e = Exposition::default();
        for r in ["util_pct=1 1", "util_pct=2 2"] {
            e.update(&format!("disk,device=sda {r}\n"));
        }
        assert_eq!(
            fourth.as_bytes(),
            super::super::http::answer("200 OK", e.render().as_bytes()).as_bytes()
        );
    }

    #[test]
    fn before_any_report_the_page_is_empty() {
        let mut served = Served::default();
        let page = served.page(&Source::default());
        assert!(
            text(&page).starts_with("HTTP/1.1 200 OK\r\n"),
            "{}",
            text(&page)
        );
        assert!(text(&page).ends_with("Content-Length: 0\r\nConnection: close\r\n\r\n"));
    }
}
