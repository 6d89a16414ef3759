//! One reading of the jobs: check the mount is cgroup v2, list the job cgroups (walking the
//! tree again on a worker node when a directory of the last walk changed, every few readings at
//! most elsewhere: `watch.rs`'s `TreeWatch`), read each job's files and compute the interval
//! since its previous reading.

use std::path::Path;

use super::instance::fs_path_into;
use super::*;

impl JobsCollector {
    /// Whether the mount is cgroup v2; logs once when it is not.
    pub(super) fn check_v2(&mut self, root: &Root) -> bool {
        if let Some(v2) = self.v2 {
            return v2;
        }
        let mount = root.sys("fs/cgroup");
        let v2 = mount.join_sized("cgroup.controllers").exists();
        if !v2 {
            tracing::info!(
                "no cgroup v2 at {} (cgroup.controllers missing): per-job metrics off; \
                 boot with systemd.unified_cgroup_hierarchy=1 (the default from RHEL 9 and \
                 Debian 11) to have them, or set [jobs] enabled = false to silence this",
                mount.display()
            );
        }
        // f_type is an i64 here, an i32 or u32 elsewhere.
        #[allow(clippy::useless_conversion)]
        let on_cgroupfs =
            rustix::fs::statfs(&mount).is_ok_and(|f| i64::from(f.f_type) == CGROUP2_SUPER_MAGIC);
        self.stale_check = !on_cgroupfs;
        self.watch = (self.stale_check && self.use_watch)
            .then(watch::DirWatch::new)
            .flatten();
        self.tree = v2.then(watch::TreeWatch::new).flatten();
        // Off cgroupfs a job with kept files holds its directory too (the rename check).
        self.kept_budget = kept_budget(KEPT.len() + usize::from(self.stale_check));
        self.mount = Some(mount);
        self.v2 = Some(v2);
        v2
    }

    /// Lists the directories below the mount into `self.paths` (relative, reusing the
    /// strings), not descending into jobs already known. Each directory is listed by
    /// `getdents64` into one buffer for the whole walk ([`RawDir`]): nothing allocated per
    /// entry, as `std::fs::read_dir` does (its entry and the name's copy).
    pub(super) fn walk(&mut self, mount: &Path, errors: &mut SourceErrors) {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
        self.paths_used = 0;
        // Directories to list: their place in `self.paths` (`None`: the mount) and depth; the
        // path and the relative name of the one listed are built in buffers of the walk's, not
        // allocated a directory.
        let mut stack: Vec<(Option<usize>, usize)> = vec![(None, 0)];
        let mut tree = self.tree.take();
        if let Some(t) = tree.as_mut() {
            t.begin();
        }
        let mut rel = String::new();
        let mut dir = PathBuf::new();
        // An entry takes at most 280 bytes (a 255-byte name): ~30 of them at the least a call.
        let mut listing = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        while let Some((at, depth)) = stack.pop() {
            rel.clear();
            if let Some(p) = at.and_then(|i| self.paths.get(i)) {
                rel.push_str(p);
            }
            fs_path_into(mount, &rel, &mut dir);
            // Watched before it is listed: a change after the listing is the next reading's.
            if let Some(t) = tree.as_mut() {
                t.add(&dir);
            }
            let fd = match rustix::fs::open(
                &dir,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(e) => {
                    let e = std::io::Error::from(e);
                    if !gone(&e) {
                        errors.count(CGROUP, &SourceError::io(&dir, e));
                        // Not listed: the next reading walks (and counts it) again.
                        if let Some(t) = tree.as_mut() {
                            t.missed();
                        }
                    }
                    continue;
                }
            };
            let mut entries = RawDir::new(&fd, &mut listing);
            // An error while listing (the directory removed meanwhile) ends its listing.
            while let Some(Ok(entry)) = entries.next() {
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                // cgroupfs gives the kind with the listing: no stat per entry (one where a
                // file system does not, as `read_dir` does).
                let is_dir = match entry.file_type() {
                    FileType::Directory => true,
                    FileType::Unknown => {
                        rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_dir())
                    }
                    _ => false,
                };
                if !is_dir {
                    continue;
                }
                let slot = if self.paths_used < self.paths.len() {
                    let s = &mut self.paths[self.paths_used];
                    s.clear();
                    s
                } else {
                    self.paths.push(String::new());
                    self.paths.last_mut().expect("just pushed")
                };
                if !rel.is_empty() {
                    slot.push_str(&rel);
                    slot.push('/');
                }
                // Every name kept, escaped where it must be (not UTF-8, spaces, backslashes).
                escape_name_into(name, slot);
                self.paths_used += 1;
                // A known job's directory under another inode: removed and made again.
                let known = match self.jobs.get_mut(slot.as_str()) {
                    Some(t) => {
                        t.replaced |= t.ino.is_some_and(|i| i != entry.ino());
                        true
                    }
                    None => false,
                };
                if depth + 1 < MAX_DEPTH && !known {
                    stack.push((Some(self.paths_used - 1), depth + 1));
                }
            }
        }
        if let Some(t) = tree.as_mut() {
            t.end();
        }
        self.tree = tree;
        self.jobs_changed = false;
    }

    /// Takes one reading of every job and computes the interval since the previous one.
    pub(super) fn read(&mut self, root: &Root, uptime_cs: u64, errors: &mut SourceErrors) {
        if !self.check_v2(root) {
            return;
        }
        let Some(mount) = self.mount.clone() else {
            return;
        };
        let at = self.clock(uptime_cs);
        self.since_walk = self.since_walk.saturating_add(1);
        let due = self.worker
            || !self.discovery.globs.is_empty()
            || self.last_at.is_none()
            || self.since_walk >= WALK_EVERY_OFF_WORKER;
        // A listing that cannot have changed since the last walk is not made again: no
        // directory it listed had a subdirectory made, removed or renamed (`watch.rs`), and
        // the jobs it did not descend into are the same.
        let walk = due && {
            let changed = self.tree.as_mut().is_none_or(watch::TreeWatch::changed);
            changed || self.jobs_changed
        };
        if walk {
            self.since_walk = 0;
            self.walks += 1;
            self.walk(&mount, errors);
            let listed = self.paths.get(..self.paths_used).unwrap_or_default();
            if listed != self.found_paths.as_slice() || self.last_at.is_none() {
                self.found = discover(listed.iter().map(String::as_str), &self.discovery);
                self.found_paths.clone_from(&listed.to_vec());
            }
        }
        let found = std::mem::take(&mut self.found);
        self.worker |= !found.parents.is_empty() || !found.jobs.is_empty();
        let start_usec = self.last_at.unwrap_or(at);
        let baseline = self.last_at.is_none();

        // The batch systems' parents: all jobs' CPU time, those that came and went too.
        let mut parents_cpu: Option<u64> = None;
        let mut parents_now = BTreeMap::new();
        for (_, parent) in &found.parents {
            let path = fs_path(&mount, parent);
            if let Some(usage) = read_parsed(
                &path.join_sized("cpu.stat"),
                &mut self.buf,
                errors,
                cpu_stat::usage_usec,
            ) {
                if let Some(before) = self.parents.get(parent) {
                    if let Some(d) = usage.checked_sub(*before) {
                        parents_cpu = Some(parents_cpu.unwrap_or(0) + d);
                    }
                }
                parents_now.insert(parent.clone(), usage);
            }
        }
        // A daemon's own leaf inside a parent (the startd's): its CPU time is no job's.
        for daemon in &found.daemons {
            let path = fs_path(&mount, daemon);
            if let Some(usage) = read_parsed(
                &path.join_sized("cpu.stat"),
                &mut self.buf,
                errors,
                cpu_stat::usage_usec,
            ) {
                if let Some(before) = self.parents.get(daemon) {
                    if let Some(d) = usage.checked_sub(*before) {
                        parents_cpu = parents_cpu.map(|c| c.saturating_sub(d));
                    }
                }
                parents_now.insert(daemon.clone(), usage);
            }
        }
        self.parents = parents_now;

        // One lookup a job: the known ones marked, the new ones noted for below. Not when the
        // listing was not made again and no job came or went since the last walk: the jobs
        // found are then the map's, each marked seen at the last reading (one that was not,
        // or was gone when read, was removed, which makes the next reading walk).
        let mut new_jobs = Vec::new();
        if walk || self.jobs_changed {
            for t in self.jobs.values_mut() {
                t.seen = false;
            }
            for (i, job) in found.jobs.iter().enumerate() {
                match self.jobs.get_mut(job.root.as_str()) {
                    Some(t) => t.seen = true,
                    None => new_jobs.push(i),
                }
            }
        }
        // The rate vectors of a reading never reported (`top`, an early reading), for this one.
        let unreported = std::mem::take(&mut self.pending.done);
        self.spare_rates.extend(
            unreported
                .into_iter()
                .map(|d| d.iv.io)
                .filter(|v| v.capacity() > 0),
        );
        let mut p = Pending {
            fresh: !baseline,
            interval_usec: at.saturating_sub(start_usec),
            // One allocation for the intervals of every job, not one per doubling.
            done: Vec::with_capacity(self.jobs.len().max(found.jobs.len())),
            ..Pending::default()
        };
        // Jobs over the cap take the places freed by jobs that ended, oldest first; each needs
        // a reading of its own before it has an interval.
        let mut read_jobs = self.jobs.values().filter(|t| t.seen && !t.dropped).count();
        for t in self.jobs.values_mut().filter(|t| t.seen && t.dropped) {
            if read_jobs >= self.cfg.max_jobs {
                break;
            }
            t.dropped = false;
            t.needs_baseline = true;
            if self.kept_used < self.kept_budget {
                t.kept = Some(Box::default());
                self.kept_used += 1;
            }
            read_jobs += 1;
        }
        for job in new_jobs.iter().filter_map(|&i| found.jobs.get(i)) {
            let dropped = read_jobs >= self.cfg.max_jobs;
            if !dropped {
                read_jobs += 1;
            }
            if !baseline {
                p.started += 1;
            }
            let absent_at = (!baseline).then_some(start_usec);
            let kept = !dropped && self.kept_used < self.kept_budget;
            self.kept_used += usize::from(kept);
            self.jobs.insert(
                Arc::from(job.root.as_str()),
                Tracked::new(job, &mount, dropped, absent_at, kept),
            );
            self.jobs_changed = true;
        }

        // What changed in the jobs' directories since the last reading (off cgroupfs).
        if let Some(w) = self.watch.as_mut() {
            w.drain();
        }
        let mut vanished = Vec::new();
        let mut psi_missing: Option<PathBuf> = None;
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        for (root_path, t) in &mut self.jobs {
            if !t.seen {
                if !baseline {
                    p.ended += 1;
                }
                vanished.push(Arc::clone(root_path));
                push_ended(&mut p, root_path, t.prev.as_ref(), start_usec, t.system);
                continue;
            }
            p.count += 1;
            if t.replaced && !baseline {
                // Removed and made again between two readings: the old job ended, a new one
                // started in the interval.
                p.ended += 1;
                p.started += 1;
                let old = t.restart(start_usec);
                push_ended(&mut p, root_path, old.as_ref(), start_usec, t.system);
            }
            if t.static_reads < STATIC_READS {
                t.read_cores(&mut self.buf, errors);
            }
            if t.dropped {
                p.dropped += 1;
                if let Some(c) = t.cores {
                    let since = t.absent_at.map_or(start_usec, |a| a.max(start_usec));
                    p.dropped_capacity_usec += at.saturating_sub(since) as f64 * c.cores;
                }
                continue;
            }
            let mut io = ReadIo {
                scratch: &mut self.scratch,
                stale_check: self.stale_check,
                watch: self.watch.as_ref(),
                check_files: false,
                now_s,
                settle_s: self.settle_s,
                file_checks: &mut self.file_checks,
                probe_absent: false,
                absent_lookups: &mut self.absent_lookups,
            };
            let mut reading = t.reading(at, &mut io, &mut self.buf, errors, &mut psi_missing);
            // Its cgroup gone under a kept descriptor (ENODEV), or its CPU time lower than at
            // the last reading (read by path from a cgroup made again since): a new instance,
            // if there is one, is read now rather than a reading late.
            let went_down = reading.is_some()
                && matches!((t.own_usec, t.own_usec_now), (Some(before), Some(now)) if now < before);
            if (reading.is_none() && std::mem::take(&mut t.lost)) || went_down {
                let old = t.restart(start_usec);
                t.read_cores(&mut self.buf, errors);
                let again = t.reading(at, &mut io, &mut self.buf, errors, &mut psi_missing);
                if again.is_some() && !baseline {
                    p.ended += 1;
                    p.started += 1;
                    push_ended(&mut p, root_path, old.as_ref(), start_usec, t.system);
                }
                reading = again;
            }
            match reading {
                Some(r) => {
                    t.own_usec = t.own_usec_now;
                    let rebaselined = std::mem::take(&mut t.needs_baseline);
                    if !baseline && !rebaselined {
                        let rates = self.spare_rates.pop().unwrap_or_default();
                        if let Some(mut iv) =
                            model::interval_with(t.prev.as_ref(), Some(&r), start_usec, rates)
                        {
                            iv.in_parent = t.system != BatchSystem::Glob;
                            p.done.push(Done {
                                root: Arc::clone(root_path),
                                iv,
                            });
                        }
                    } else if !baseline {
                        // Back under the cap: no interval of its own, but its CPU time over the
                        // interval is in the parents'; its cores over the interval (it was there,
                        // over the cap, at the start) are capacity, as for a job over the cap.
                        if let Some(c) = t.cores {
                            p.dropped_capacity_usec +=
                                at.saturating_sub(start_usec) as f64 * c.cores;
                        }
                    }
                    if let Some(old) = t.prev.replace(r).and_then(|p| p.io) {
                        t.spare_io = old;
                    }
                }
                // Gone while read: it ended (its CPU time is in the parent's).
                None => {
                    t.seen = false;
                    p.count -= 1;
                    if !baseline {
                        p.ended += 1;
                    }
                    vanished.push(Arc::clone(root_path));
                }
            }
        }
        self.jobs_changed |= !vanished.is_empty();
        for v in vanished {
            if self.jobs.remove(&*v).is_some_and(|t| t.kept.is_some()) {
                self.kept_used = self.kept_used.saturating_sub(1);
            }
        }
        if p.dropped > 0 && !self.warned_cap {
            self.warned_cap = true;
            tracing::warn!(
                "{} jobs on this node, over [jobs] max_jobs = {}: {} are not read one by one \
                 (no job lines; counted in the jobs line's count, dropped and totals)",
                p.count,
                self.cfg.max_jobs,
                p.dropped
            );
        }
        if let (Some(path), false) = (psi_missing, self.warned_psi) {
            if psi_is_off(&path) {
                self.warned_psi = true;
                tracing::warn!(
                    "no cgroup pressure ({}): the kernel has PSI off; boot with psi=1 (RHEL 8 \
                 leaves it off by default) for the io/cpu/memory pressure fields; CPU \
                 efficiency, I/O rates and memory go on without them",
                    path.display()
                );
            }
        }
        p.parents_cpu_usec = parents_cpu;
        self.found = found;
        self.last_at = Some(at);
        if !baseline {
            p.node = Some(self.node(&p));
        }
        self.live = self.worker.then(|| self.live_of(&p));
        self.pending = p;
    }
}
