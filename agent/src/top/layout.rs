//! How the lines of a terminal are shared: a pure function of what there is to show and how
//! high the screen is, so that the screen of a 200-disk server at 80×24 can be checked without
//! one.
//!
//! The title always has the first line and the health summary the next ones (a worker node's
//! jobs line among them). Then, in this order, each part gets its least: one row for each kind
//! of unhealthy object, one of the jobs stalled on I/O, three rows of the device table, one of
//! the interface table, the line of keys. What is left goes to the unhealthy objects (one more
//! row to each kind in turn), then to the jobs, then to the devices, then to the interfaces. A table is drawn after a blank line and under its header; one cut short ends in
//! a line saying how many rows are left out, which counts as one of its rows.

/// What there is to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wants {
    /// Summary lines of the health pane.
    pub summary: usize,
    /// Unhealthy arrays, maps, pools and hardware RAID VDs (rows wanted per table; 0: no table).
    pub health: [usize; 4],
    /// Jobs stalled on I/O (rows of the jobs table; 0: no table).
    pub jobs: usize,
    /// Device rows wanted (the devices, at most `--devices` of them, plus the line saying how
    /// many more there are when there are).
    pub devices: usize,
    /// Interface rows.
    pub nets: usize,
    /// The line of keys.
    pub footer: bool,
}

/// The lines each part gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    /// Summary lines shown.
    pub summary: usize,
    /// Body lines of each health table (rows, the last one the "more" line when cut).
    pub health: [usize; 4],
    /// Body lines of the jobs table.
    pub jobs: usize,
    /// Body lines of the device table.
    pub devices: usize,
    /// Body lines of the interface table.
    pub nets: usize,
    /// The line of keys (and the blank line above it).
    pub footer: bool,
}

/// Least device rows before the unhealthy objects get more than one row each.
const MIN_DEVICES: usize = 3;
/// Lines a table costs besides its rows: the blank line above it and its header.
const FRAME: usize = 2;

impl Layout {
    /// Lines the screen takes: the title, the summary, each table drawn and the keys.
    pub fn lines(&self) -> usize {
        let table = |rows: usize| if rows > 0 { FRAME + rows } else { 0 };
        1 + self.summary
            + self.health.iter().map(|&r| table(r)).sum::<usize>()
            + table(self.jobs)
            + table(self.devices)
            + table(self.nets)
            + if self.footer { 2 } else { 0 }
    }
}

/// Shares `height` lines (`None`: as many as wanted) among `w`.
pub fn plan(w: &Wants, height: Option<usize>) -> Layout {
    let Some(height) = height else {
        return Layout {
            summary: w.summary,
            health: w.health,
            jobs: w.jobs,
            devices: w.devices,
            nets: w.nets,
            footer: w.footer,
        };
    };
    let mut l = Layout::default();
    // the title
    let mut left = height.saturating_sub(1);
    l.summary = w.summary.min(left);
    left -= l.summary;
    // Opens a table with `rows` of its rows if the frame and one row fit.
    let open = |left: &mut usize, got: &mut usize, rows: usize| {
        if *got == 0 && rows > 0 && *left > FRAME {
            let n = rows.min(*left - FRAME);
            *got = n;
            *left -= FRAME + n;
        }
    };
    for (got, &want) in l.health.iter_mut().zip(&w.health) {
        open(&mut left, got, want.min(1));
    }
    open(&mut left, &mut l.jobs, w.jobs.min(1));
    open(&mut left, &mut l.devices, w.devices.min(MIN_DEVICES));
    open(&mut left, &mut l.nets, w.nets.min(1));
    if w.footer && left >= 2 {
        l.footer = true;
        left -= 2;
    }
    // One more row to each kind of unhealthy object in turn (a table not opened yet needs its
    // frame too).
    loop {
        let mut grew = false;
        for (got, &want) in l.health.iter_mut().zip(&w.health) {
            if *got == 0 {
                open(&mut left, got, want.min(1));
                grew |= *got > 0;
            } else if *got < want && left > 0 {
                *got += 1;
                left -= 1;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    for (got, want) in [
        (&mut l.jobs, w.jobs),
        (&mut l.devices, w.devices),
        (&mut l.nets, w.nets),
    ] {
        if *got == 0 {
            open(&mut left, got, want);
        } else {
            let more = want.saturating_sub(*got).min(left);
            *got += more;
            left -= more;
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(health: [usize; 4]) -> Wants {
        Wants {
            summary: 1,
            health,
            jobs: 0,
            devices: 41,
            nets: 9,
            footer: true,
        }
    }

    #[test]
    fn a_healthy_server_gives_the_devices_what_the_title_leaves() {
        let l = plan(&bench([0; 4]), Some(24));
        assert_eq!(l.lines(), 24);
        assert_eq!((l.summary, l.health), (1, [0; 4]));
        assert_eq!((l.devices, l.nets, l.footer), (15, 1, true));
        let l = plan(&bench([0; 4]), Some(60));
        assert_eq!((l.devices, l.nets, l.lines()), (41, 9, 58));
    }

    #[test]
    fn unhealthy_objects_come_first_but_leave_the_devices_their_least() {
        let l = plan(&bench([3, 40, 1, 0]), Some(24));
        assert_eq!(l.lines(), 24, "{l:?}");
        assert_eq!(l.devices, MIN_DEVICES, "{l:?}");
        assert_eq!(l.nets, 1, "{l:?}");
        // every kind has rows, shared in turn
        assert_eq!(l.health, [3, 2, 1, 0], "{l:?}");
        let l = plan(&bench([3, 40, 1, 0]), Some(60));
        assert_eq!(l.health, [3, 38, 1, 0], "{l:?}");
        assert_eq!(l.lines(), 60, "{l:?}");
    }

    #[test]
    fn no_height_is_too_small_and_the_title_stays() {
        for h in 0..80 {
            for health in [[0; 4], [1, 1, 0, 0], [8, 40, 2, 0]] {
                let l = plan(&bench(health), Some(h));
                assert!(l.lines() <= h.max(1), "{h}: {l:?}");
                // past the title and summary, something is always shown
                if h >= 5 {
                    assert!(l.devices + l.health.iter().sum::<usize>() > 0, "{h}: {l:?}");
                }
            }
        }
        let all = plan(&bench([8, 40, 2, 0]), None);
        assert_eq!((all.health, all.devices, all.nets), ([8, 40, 2, 0], 41, 9));
    }
}
