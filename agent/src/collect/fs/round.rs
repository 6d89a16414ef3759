//! One round of the `fs` collector and the thread that runs it: the mount table, each
//! filesystem's place, each one's `statvfs` answer; which mount points are stuck, and when a
//! round that made no progress is given up on.

use super::*;

/// Mount points whose `statvfs` has not returned, shared with the threads running rounds.
pub(super) type Stuck = Arc<Mutex<BTreeSet<String>>>;

/// Where a round's thread is: in `statvfs` on a mount point (`Some`) or elsewhere (`None`), and
/// since when; and whether it was given up on. One per thread: a thread given up on must not
/// move its successor's clock.
#[derive(Debug)]
pub(super) struct Progress {
    pub(super) mount: Option<String>,
    pub(super) since: Instant,
    pub(super) abandoned: bool,
}
pub(super) type Busy = Arc<Mutex<Progress>>;

pub(super) fn progress(busy: &Busy, mount: Option<String>) {
    let mut p = lock(busy);
    p.mount = mount;
    p.since = Instant::now();
}

/// The round's thread got the answer for `mount`; `next` is the call it waits for now. Whether
/// to go on: not once the thread has been given up on (another one measures the rest).
///
/// Under the progress lock, which [`give_up`] holds from its look at the clock to putting the
/// mount point in `stuck`: either the thread was given up on first, and the mount point it put
/// in `stuck` is taken out here (it answered), or the progress moved first and it is not given
/// up on. With two locks a mount point that had answered could stay in `stuck` for ever.
pub(super) fn answered(busy: &Busy, stuck: &Stuck, mount: &str, next: Option<String>) -> bool {
    let mut p = lock(busy);
    // A call that was given up on came back: the mount point is measured again.
    lock(stuck).remove(mount);
    if p.abandoned {
        return false;
    }
    p.mount = next;
    p.since = Instant::now();
    true
}

/// Gives up on a round's thread that made no progress for `timeout`: marks it abandoned and
/// puts the mount point it is stuck on into `stuck`, in one hold of the progress lock (see
/// [`answered`]). `None` while it is making progress; else where it was stuck (`Some(None)`:
/// not in a `statvfs`).
pub(super) fn give_up(busy: &Busy, stuck: &Stuck, timeout: Duration) -> Option<Option<String>> {
    let mut p = lock(busy);
    if p.since.elapsed() <= timeout {
        return None;
    }
    p.abandoned = true;
    if let Some(mp) = &p.mount {
        lock(stuck).insert(mp.clone());
    }
    Some(p.mount.clone())
}

/// Everything a round needs, cloned into its thread.
#[derive(Clone)]
pub(super) struct RoundCx {
    pub(super) root: Root,
    pub(super) cfg: FsConfig,
    pub(super) statfs: Arc<dyn Statfs>,
    pub(super) stuck: Stuck,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One round: the mount table, each filesystem's place, each one's numbers.
pub(super) fn run_round(cx: &RoundCx, busy: &Busy, at_s: f64) -> Round {
    let mut round = Round {
        at_s,
        ..Round::default()
    };
    let path = cx.root.proc("self/mountinfo");
    let text = match read_optional(&path) {
        Ok(Some(t)) => t,
        // No mount table (a fixture tree without one): nothing to measure, quietly.
        Ok(None) => return round,
        Err(e) => {
            round.errors.push((MOUNTINFO, e.to_string()));
            return round;
        }
    };
    let parsed = mountinfo::parse(&text);
    for e in parsed.errors {
        round
            .errors
            .push((MOUNTINFO, SourceError::parse(&path, e).to_string()));
    }
    let chosen = select(&parsed.rows, &cx.cfg);
    let names = if chosen.iter().any(|m| m.major != 0) {
        device_names(&cx.root).unwrap_or_else(|e| {
            round.errors.push((MOUNTINFO, e.to_string()));
            BTreeMap::new()
        })
    } else {
        BTreeMap::new()
    };
    let todo: Vec<&Mount> = {
        let stuck = lock(&cx.stuck);
        chosen
            .into_iter()
            .filter(|m| {
                !stuck.contains(&m.mount_point) && !cx.statfs.still_stuck(&m.mount_point, &m.path())
            })
            .collect()
    };
    let paths: Vec<PathBuf> = todo.iter().map(|m| m.path()).collect();
    let args: Vec<(&str, &Path)> = todo
        .iter()
        .zip(&paths)
        .map(|(m, p)| (m.mount_point.as_str(), p.as_path()))
        .collect();
    let mut results = Vec::with_capacity(todo.len());
    progress(busy, todo.first().map(|m| m.mount_point.clone()));
    cx.statfs.statvfs_each(&args, &mut |i, r| {
        results.push(r);
        answered(
            busy,
            &cx.stuck,
            &todo[i].mount_point,
            todo.get(i + 1).map(|m| m.mount_point.clone()),
        )
    });
    progress(busy, None);
    for (m, result) in todo.into_iter().zip(results) {
        let stat = match result {
            Ok(s) => s,
            // Unmounted between reading the table and the call.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && cx.cfg.statvfs_file.as_os_str().is_empty() =>
            {
                continue
            }
            // Given up on by `statvfs_each` itself (the child's deadline): skipped until the
            // call returns.
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                round.errors.push((
                    STATVFS,
                    format!("statvfs {}: {e}; skipped until it answers", m.mount_point),
                ));
                continue;
            }
            Err(e) => {
                round
                    .errors
                    .push((STATVFS, format!("statvfs {}: {e}", m.mount_point)));
                continue;
            }
        };
        let place = if m.fstype == "zfs" {
            Placement {
                pool: m.source.split('/').next().unwrap_or_default().to_owned(),
                ..Placement::default()
            }
        } else if let Some(name) = names.get(&(m.major, m.minor)) {
            place(&cx.root, name, &names)
        } else {
            Placement::default()
        };
        round.readings.push(FsReading {
            mount: m.mount_point.clone(),
            fstype: m.fstype.clone(),
            devt: (m.major, m.minor),
            read_only: m.read_only || stat.read_only,
            place,
            stat,
        });
    }
    round
}

/// A thread running rounds on request.
pub(super) struct Worker {
    pub(super) requests: Sender<f64>,
    pub(super) rounds: Receiver<Round>,
    pub(super) busy: Busy,
}

impl Worker {
    pub(super) fn spawn(cx: RoundCx) -> io::Result<Self> {
        let (requests, req_rx) = mpsc::channel::<f64>();
        let (round_tx, rounds) = mpsc::channel();
        let busy = Arc::new(Mutex::new(Progress {
            mount: None,
            since: Instant::now(),
            abandoned: false,
        }));
        let theirs = Arc::clone(&busy);
        std::thread::Builder::new()
            .name("storwatch-fs".into())
            .spawn(move || {
                while let Ok(at_s) = req_rx.recv() {
                    if round_tx.send(run_round(&cx, &theirs, at_s)).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Self {
            requests,
            rounds,
            busy,
        })
    }
}
