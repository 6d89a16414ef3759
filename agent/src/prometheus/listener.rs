//! The `/metrics` listener: one thread, one epoll event loop holding every connection.
//!
//! A scrape must not wait behind other clients, and no client may make the agent spend more than
//! a little memory or a thread: every connection is non-blocking and registered with one epoll
//! instance; what is kept of it is its socket, a deadline, and either the request line read so
//! far (at most [`MAX_REQUEST_LINE`](super::http::MAX_REQUEST_LINE) bytes: the rest of the
//! headers are only counted; [`super::http`] reads them) or the answer being written (a shared
//! reference to the page, and how much of it went out).
//!
//! * A client has [`CLIENT_TIMEOUT`] from its connection to send its request's headers, then
//!   [`CLIENT_TIMEOUT`] more to read the whole answer; at its deadline the connection is closed
//!   (the client sees the connection end, with no answer or a cut one). Writes never block: a
//!   client that does not read holds a socket buffer, not the loop. The buffer is
//!   [`SEND_BUFFER`] until the answer, then the answer's size up to [`MAX_SEND_BUFFER`] while
//!   [`SEND_BUFFER_BUDGET`] lasts, so that a big page goes out at the link's speed.
//! * At most `max_connections` connections are open (`[prometheus] max_connections`, default
//!   [`DEFAULT_MAX_CONNECTIONS`]); a new one beyond the cap resets the one nearest its deadline —
//!   mostly the longest-waiting client that has not finished its request, since an answer being
//!   sent has 5 s from its request — so that the newest (the scrape) is served. The cap is also held below half of the agent's open-file limit, so that
//!   connections never take the files the sampling needs.
//! * The page is made by this thread when a scrape asks for it, head and body together, and
//!   shared by every answer of the same report while one is sending it ([`super::served`]); the
//!   exposition's lock is held for the making only, never across I/O, so the sampling thread
//!   never waits for a client.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::{epoll, Timespec};
use rustix::io::Errno;

use super::http::{answer, Answer, Asked, RequestHead};
use super::served::{Served, Source};

/// Time a client gets to send its request, and then to read the whole answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections open at once unless `[prometheus] max_connections` says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;
/// Connections the kernel completes and queues before the loop takes them (std's 128 is
/// filled in a few milliseconds by a burst of connections while the thread waits for a core,
/// and a connection beyond is dropped and retried by its client a second later). Linux caps it at
/// `net.core.somaxconn` (4096 by default).
const LISTEN_BACKLOG: i32 = 1024;
/// Each connection's socket send buffer until it is answered (the kernel doubles it): what a
/// client that does not read its answer can make the kernel hold for it, instead of the
/// megabytes autotuning grows a buffer to. Answers up to this size are sent with it.
pub const SEND_BUFFER: usize = 32 << 10;
/// The send buffer a connection answered with a larger page gets: the page's size, at most
/// this (and at most the kernel's `net.core.wmem_max`). With 32 KiB, the kernel sent ~64 KB
/// and then waited for the client's delayed ACK (40 ms) before the next: a 4.3 MB page took
/// 1.8 s on loopback, and a page over ~9 MB could not be sent within [`CLIENT_TIMEOUT`].
pub const MAX_SEND_BUFFER: usize = 4 << 20;
/// The enlarged send buffers of all connections together at most: beyond it an answer is sent
/// with [`SEND_BUFFER`] (slowly, as above), so that clients asking for the page and never
/// reading it hold at most this much of the kernel's memory.
pub const SEND_BUFFER_BUDGET: usize = 32 << 20;
/// Each connection's socket receive buffer (the kernel doubles it, and keeps at least its own
/// minimum): a request is at most a few KiB, and a client that keeps sending after it while its
/// answer is written would otherwise fill the default (autotuned to some 128 KiB), charged to the
/// agent's memory for each of up to `max_connections` connections.
pub const RECV_BUFFER: usize = 4 << 10;
/// Connections taken from the listen queue per wake-up, so that the open ones are served too.
const ACCEPT_BATCH: usize = 64;
/// How long accepting pauses when the agent is out of file descriptors and has no connection to
/// close.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// At most one warning this often about connections closed at the cap.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// The listening socket's token in epoll; connections have `generation << 32 | slot`.
const LISTENER: u64 = u64::MAX;

/// Connections the listener may hold with `max` configured and an open-file limit of
/// `file_limit` (`None`: unlimited): at most half the limit, so that the sampling always finds
/// files to open; at least 1.
pub(super) fn connection_cap(max: usize, file_limit: Option<u64>) -> usize {
    let half = file_limit.map_or(usize::MAX, |l| usize::try_from(l / 2).unwrap_or(usize::MAX));
    max.min(half).max(1)
}

/// Raises the soft open-file limit towards what `max` connections need (twice `max`, within the
/// hard limit) and returns the cap that the resulting limit allows. Under systemd the hard limit
/// is the unit's `LimitNOFILE=`.
pub(super) fn cap_within_file_limit(max: usize) -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let want = u64::try_from(max).unwrap_or(u64::MAX).saturating_mul(2);
    let limit = getrlimit(Resource::Nofile);
    if let Some(soft) = limit.current.filter(|&s| s < want) {
        let raised = limit.maximum.map_or(want, |hard| hard.min(want));
        if raised > soft {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(raised),
                    maximum: limit.maximum,
                },
            );
        }
    }
    let soft = getrlimit(Resource::Nofile).current;
    let cap = connection_cap(max, soft);
    if cap < max {
        tracing::warn!(
            max_connections = max,
            open_file_limit = soft.unwrap_or(u64::MAX),
            cap,
            "prometheus: fewer connections than max_connections: at most half the open-file \
             limit (raise LimitNOFILE)"
        );
    }
    cap
}

enum State {
    Reading(RequestHead),
    Writing { answer: Arc<Answer>, sent: usize },
}

struct Conn {
    stream: TcpStream,
    deadline: Instant,
    state: State,
    /// What its send buffer was enlarged to, from [`SEND_BUFFER_BUDGET`] (0: not enlarged).
    send_buffer: usize,
}

#[derive(Default)]
struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

/// The fixed answers, made once.
struct Answers {
    not_found: Arc<Answer>,
    method_not_allowed: Arc<Answer>,
    uri_too_long: Arc<Answer>,
    headers_too_large: Arc<Answer>,
}

pub(super) struct EventLoop {
    epoll: OwnedFd,
    listener: TcpListener,
    source: Arc<Source>,
    /// The page every `GET /metrics` gets, made when asked.
    served: Served,
    /// When the kept page goes if no scrape takes it ([`Served::tidy`]).
    page_until: Option<Instant>,
    answers: Answers,
    slots: Vec<Slot>,
    free: Vec<usize>,
    open: usize,
    cap: usize,
    /// (deadline, token) of every open connection: the first is the next to expire, and the
    /// one closed when a new connection comes at the cap.
    deadlines: BTreeSet<(Instant, u64)>,
    accept_paused_until: Option<Instant>,
    closed_at_cap: u64,
    last_cap_warning: Option<Instant>,
    /// What is left of [`SEND_BUFFER_BUDGET`].
    send_budget: usize,
}

impl EventLoop {
    pub(super) fn new(
        listener: TcpListener,
        source: Arc<Source>,
        cap: usize,
    ) -> io::Result<EventLoop> {
        listener.set_nonblocking(true)?;
        // listen() again on a listening socket sets its backlog anew
        rustix::net::listen(&listener, LISTEN_BACKLOG)?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            &listener,
            epoll::EventData::new_u64(LISTENER),
            epoll::EventFlags::IN,
        )?;
        Ok(EventLoop {
            epoll,
            listener,
            source,
            served: Served::default(),
            page_until: None,
            answers: Answers {
                not_found: answer("404 Not Found", b"see /metrics\n"),
                method_not_allowed: answer("405 Method Not Allowed", b""),
                uri_too_long: answer("414 URI Too Long", b""),
                headers_too_large: answer("431 Request Header Fields Too Large", b""),
            },
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            cap,
            deadlines: BTreeSet::new(),
            accept_paused_until: None,
            closed_at_cap: 0,
            last_cap_warning: None,
            send_budget: SEND_BUFFER_BUDGET,
        })
    }

    /// Serves for ever.
    pub(super) fn run(mut self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
        loop {
            let now = Instant::now();
            let wake = [
                self.deadlines.first().map(|(d, _)| *d),
                self.accept_paused_until,
                self.page_until,
            ]
            .into_iter()
            .flatten()
            .min();
            // epoll_wait counts whole milliseconds: one more, so as not to wake just before
            // the deadline and spin
            let timeout = wake.map(|w| {
                Timespec::try_from(w.saturating_duration_since(now) + Duration::from_millis(1))
                    .unwrap_or(Timespec {
                        tv_sec: i64::from(i32::MAX),
                        tv_nsec: 0,
                    })
            });
            events.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut events), timeout.as_ref()) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => {
                    tracing::error!(error = %e, "prometheus: epoll_wait failed");
                    std::thread::sleep(ACCEPT_PAUSE);
                }
            }
            for ev in &events {
                let (token, flags) = (ev.data.u64(), ev.flags);
                if token == LISTENER {
                    self.accept();
                } else {
                    self.ready(token, flags);
                }
            }
            let now = Instant::now();
            self.expire(now);
            self.page_until = self.served.tidy(now);
            if self.accept_paused_until.is_some_and(|until| until <= now) {
                self.accept_paused_until = None;
                let _ = epoll::modify(
                    &self.epoll,
                    &self.listener,
                    epoll::EventData::new_u64(LISTENER),
                    epoll::EventFlags::IN,
                );
            }
        }
    }

    fn accept(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    // out of file descriptors: the oldest connection makes room, else the
                    // listen queue waits (level-triggered, it would wake the loop at once)
                    if self.close_oldest() {
                        self.note_closed_at_cap();
                        continue;
                    }
                    tracing::warn!(error = %e, "prometheus: cannot accept a connection");
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                    let _ = epoll::modify(
                        &self.epoll,
                        &self.listener,
                        epoll::EventData::new_u64(LISTENER),
                        epoll::EventFlags::empty(),
                    );
                    return;
                }
                // a connection reset while queued, and the like: the next one
                Err(e) => tracing::debug!(error = %e, "prometheus: accept"),
            }
        }
    }

    fn admit(&mut self, stream: TcpStream) {
        if self.open >= self.cap && self.close_oldest() {
            self.note_closed_at_cap();
        }
        if let Err(e) = stream.set_nonblocking(true).and_then(|()| {
            rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER)?;
            rustix::net::sockopt::set_socket_recv_buffer_size(&stream, RECV_BUFFER)?;
            Ok(())
        }) {
            tracing::debug!(error = %e, "prometheus: new connection");
            return;
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let token = (u64::from(slot.generation) << 32) | index as u64;
        if let Err(e) = epoll::add(
            &self.epoll,
            &stream,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        ) {
            tracing::debug!(error = %e, "prometheus: new connection");
            self.free.push(index);
            return;
        }
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        slot.conn = Some(Conn {
            stream,
            deadline,
            state: State::Reading(RequestHead::default()),
            send_buffer: 0,
        });
        self.deadlines.insert((deadline, token));
        self.open += 1;
    }

    fn conn(&mut self, token: u64) -> Option<&mut Conn> {
        conn_in(&mut self.slots, token)
    }

    fn ready(&mut self, token: u64, flags: epoll::EventFlags) {
        let Some(conn) = self.conn(token) else {
            return;
        };
        if flags.contains(epoll::EventFlags::ERR) {
            self.close(token);
            return;
        }
        if matches!(conn.state, State::Reading(_)) {
            self.read(token);
        } else {
            self.write(token);
        }
    }

    fn read(&mut self, token: u64) {
        let mut buf = [0u8; 4096];
        let asked = loop {
            let Some(conn) = self.conn(token) else {
                return;
            };
            let State::Reading(head) = &mut conn.state else {
                return;
            };
            match conn.stream.read(&mut buf) {
                Ok(0) => match head.at_end_of_input() {
                    Some(asked) => break asked,
                    None => {
                        self.close(token);
                        return;
                    }
                },
                Ok(n) => {
                    if let Some(asked) = head.feed(buf.get(..n).unwrap_or_default()) {
                        break asked;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(error = %e, "prometheus: client went away");
                    self.close(token);
                    return;
                }
            }
        };
        let answer = match asked {
            Asked::Metrics => self.served.page(&self.source),
            Asked::NotFound => Arc::clone(&self.answers.not_found),
            Asked::MethodNotAllowed => Arc::clone(&self.answers.method_not_allowed),
            Asked::UriTooLong => Arc::clone(&self.answers.uri_too_long),
            Asked::HeadersTooLarge => Arc::clone(&self.answers.headers_too_large),
        };
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        let budget = self.send_budget;
        let Some(conn) = conn_in(&mut self.slots, token) else {
            return;
        };
        // A page larger than the send buffer goes out at the link's speed only with a buffer
        // that holds it (the client's delayed ACKs pace a small one), from a bounded budget.
        let want = answer.as_bytes().len().min(MAX_SEND_BUFFER).min(budget);
        if want > SEND_BUFFER
            && rustix::net::sockopt::set_socket_send_buffer_size(&conn.stream, want).is_ok()
        {
            conn.send_buffer = want;
            self.send_budget -= want;
        }
        let old = std::mem::replace(&mut conn.deadline, deadline);
        conn.state = State::Writing { answer, sent: 0 };
        self.deadlines.remove(&(old, token));
        self.deadlines.insert((deadline, token));
        self.write(token);
    }

    fn write(&mut self, token: u64) {
        loop {
            let Some(conn) = conn_in(&mut self.slots, token) else {
                return;
            };
            let State::Writing { answer, sent } = &mut conn.state else {
                return;
            };
            let rest = answer.as_bytes().get(*sent..).unwrap_or_default();
            if rest.is_empty() {
                self.close(token);
                return;
            }
            match conn.stream.write(rest) {
                Ok(0) => {
                    self.close(token);
                    return;
                }
                Ok(n) => *sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // the client reads slowly or not at all: on when its socket has room
                    let _ = epoll::modify(
                        &self.epoll,
                        &conn.stream,
                        epoll::EventData::new_u64(token),
                        epoll::EventFlags::OUT,
                    );
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(error = %e, "prometheus: client went away");
                    self.close(token);
                    return;
                }
            }
        }
    }

    /// Closes a connection that was served, or a client that is gone.
    fn close(&mut self, token: u64) {
        self.close_as(token, false);
    }

    /// Closes a connection whose client ran out of time or room: with a reset, so that the
    /// kernel drops at once what the client did not read rather than keep trying to deliver it.
    fn cut(&mut self, token: u64) {
        self.close_as(token, true);
    }

    fn close_as(&mut self, token: u64, reset: bool) {
        let index = (token & 0xffff_ffff) as usize;
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if u64::from(slot.generation) != token >> 32 {
            return;
        }
        let Some(conn) = slot.conn.take() else {
            return;
        };
        slot.generation = slot.generation.wrapping_add(1);
        self.deadlines.remove(&(conn.deadline, token));
        self.send_budget += conn.send_buffer;
        if reset {
            let _ = rustix::net::sockopt::set_socket_linger(&conn.stream, Some(Duration::ZERO));
        }
        // closing the socket takes it out of the epoll set too (it has no other descriptor)
        drop(conn);
        self.free.push(index);
        self.open -= 1;
    }

    /// Closes the connection nearest its deadline; whether there was one.
    fn close_oldest(&mut self) -> bool {
        match self.deadlines.first() {
            Some(&(_, token)) => {
                self.cut(token);
                true
            }
            None => false,
        }
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(deadline, token)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            tracing::debug!("prometheus: a client too slow, connection closed");
            self.cut(token);
        }
    }

    fn note_closed_at_cap(&mut self) {
        self.closed_at_cap += 1;
        let now = Instant::now();
        if self
            .last_cap_warning
            .is_none_or(|t| now.duration_since(t) >= WARN_EVERY)
        {
            tracing::warn!(
                cap = self.cap,
                closed = self.closed_at_cap,
                "prometheus: connections at the cap; the oldest closed to take new ones"
            );
            self.last_cap_warning = Some(now);
            self.closed_at_cap = 0;
        }
    }
}

/// The connection of `token`, unless it was closed since the event was queued.
fn conn_in(slots: &mut [Slot], token: u64) -> Option<&mut Conn> {
    let slot = slots.get_mut((token & 0xffff_ffff) as usize)?;
    if u64::from(slot.generation) != token >> 32 {
        return None;
    }
    slot.conn.as_mut()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_half_the_file_limit_at_most() {
        assert_eq!(connection_cap(2048, Some(4096)), 2048);
        assert_eq!(connection_cap(2048, Some(1024)), 512);
        assert_eq!(connection_cap(2048, None), 2048);
        assert_eq!(connection_cap(2048, Some(1)), 1);
        assert_eq!(connection_cap(10, Some(1 << 20)), 10);
    }
}
