//! The events of one observation of the controllers: a controller, virtual drive or physical
//! drive whose state changed since the last one (failed, degraded, rebuilding, back to
//! optimal), a rebuild that began, ended or stalled, a battery or write-back cache that changed.

use super::*;

impl HwraidDetector {
    /// Appends to `events` what changed between the last observation and this one.
    pub(super) fn transitions(
        &self,
        controllers: &[ControllerStatus],
        vds: &[VdStatus],
        pds: &[PdStatus],
        events: &mut Vec<Event>,
    ) {
        for c in controllers {
            let prev = self
                .controllers
                .iter()
                .find(|p| p.controller == c.controller);
            let Some(p) = prev else {
                events.push(Event::new(
                    SOURCE,
                    c.controller.clone(),
                    "",
                    c.status.clone().unwrap_or_default(),
                    format!(
                        "controller {} appeared: {}",
                        c.controller,
                        c.model.as_deref().unwrap_or("unknown model")
                    ),
                ));
                continue;
            };
            if p.status != c.status {
                events.push(Event::new(
                    SOURCE,
                    c.controller.clone(),
                    p.status.clone().unwrap_or_default(),
                    c.status.clone().unwrap_or_default(),
                    format!(
                        "controller {} status {} → {}",
                        c.controller,
                        p.status.as_deref().unwrap_or("?"),
                        c.status.as_deref().unwrap_or("?")
                    ),
                ));
            }
            if p.bbu_state != c.bbu_state {
                let to = c.bbu_state.clone().unwrap_or_default();
                let text = match c.bbu_ok {
                    Some(false) => format!(
                        "{} battery/CacheVault {}: write-back VDs fall to write-through",
                        c.controller,
                        if to.is_empty() { "gone" } else { to.as_str() }
                    ),
                    _ => format!(
                        "{} battery/CacheVault {}",
                        c.controller,
                        if to.is_empty() { "gone" } else { to.as_str() }
                    ),
                };
                events.push(Event::new(
                    SOURCE,
                    format!("{}/bbu", c.controller),
                    p.bbu_state.clone().unwrap_or_default(),
                    to,
                    text,
                ));
            }
        }
        for p in &self.controllers {
            if !controllers.iter().any(|c| c.controller == p.controller) {
                events.push(Event::new(
                    SOURCE,
                    p.controller.clone(),
                    p.status.clone().unwrap_or_default(),
                    "",
                    format!("controller {} no longer answers storcli", p.controller),
                ));
            }
        }
        for v in vds {
            let Some(p) = self.vds.iter().find(|p| p.vd == v.vd) else {
                events.push(Event::new(
                    SOURCE,
                    v.vd.clone(),
                    "",
                    v.state.clone(),
                    if vd_word_known(&v.state) {
                        format!("{} appeared: {} {}", v.vd, v.level, v.state)
                    } else {
                        unknown(v)
                    },
                ));
                continue;
            };
            if p.state != v.state {
                let text = if v.state == "OfLn" {
                    format!("{} {} is offline: its data is unavailable", v.vd, v.level)
                } else if v.degraded {
                    format!(
                        "{} {} {}: {} of {} members online, {} more failure(s) absorbed",
                        v.vd,
                        v.level,
                        if v.state == "Pdgd" {
                            "partially degraded"
                        } else {
                            "degraded"
                        },
                        v.members_online,
                        v.members,
                        v.redundancy_left.map_or("?".into(), |r| r.to_string())
                    )
                } else if v.ok {
                    format!("{} {} optimal again", v.vd, v.level)
                } else if !vd_word_known(&v.state) {
                    unknown(v)
                } else {
                    format!("{} {} {} → {}", v.vd, v.level, p.state, v.state)
                };
                events.push(Event::new(
                    SOURCE,
                    v.vd.clone(),
                    p.state.clone(),
                    v.state.clone(),
                    text,
                ));
            }
            let obj = format!("{}/rebuild", v.vd);
            match (p.members_rebuilding > 0, v.members_rebuilding > 0) {
                (false, true) => events.push(Event::new(
                    SOURCE,
                    obj.clone(),
                    "idle",
                    "rebuilding",
                    format!("{}: rebuild started", v.vd),
                )),
                (true, false) => events.push(Event::new(
                    SOURCE,
                    obj.clone(),
                    if p.rebuild_stalled {
                        "stalled"
                    } else {
                        "rebuilding"
                    },
                    "idle",
                    format!("{}: rebuild ended, VD {}", v.vd, v.state),
                )),
                _ => {}
            }
            if v.members_rebuilding > 0 && p.members_rebuilding > 0 {
                match (p.rebuild_stalled, v.rebuild_stalled) {
                    (false, true) => events.push(Event::new(
                        SOURCE,
                        obj.clone(),
                        "rebuilding",
                        "stalled",
                        format!(
                            "{}: rebuild stalled at {}%",
                            v.vd,
                            v.rebuild_progress_pct.map_or("?".into(), |p| p.to_string())
                        ),
                    )),
                    (true, false) => events.push(Event::new(
                        SOURCE,
                        obj,
                        "stalled",
                        "rebuilding",
                        format!("{}: rebuild moving again", v.vd),
                    )),
                    _ => {}
                }
            }
            if let (Some(was), Some(now)) = (p.write_back_active, v.write_back_active) {
                if was != now {
                    let word = |wb: bool| if wb { "write-back" } else { "write-through" };
                    let text = if now {
                        format!("{}: write cache back to write-back", v.vd)
                    } else if v.write_back_configured != Some(false) {
                        format!(
                            "{}: write-back cache fell to write-through (battery/CacheVault?): every write now waits for the disks",
                            v.vd
                        )
                    } else {
                        format!("{}: write cache now write-through", v.vd)
                    };
                    events.push(Event::new(
                        SOURCE,
                        format!("{}/cache", v.vd),
                        word(was),
                        word(now),
                        text,
                    ));
                }
            }
        }
        for p in &self.vds {
            if !vds.iter().any(|v| v.vd == p.vd) {
                events.push(Event::new(
                    SOURCE,
                    p.vd.clone(),
                    p.state.clone(),
                    "",
                    format!("{} vanished", p.vd),
                ));
            }
        }
        for d in pds {
            let key = |x: &PdStatus| (x.controller.clone(), x.slot.clone());
            let obj = format!("{}/{}", d.controller, d.slot);
            match self.pds.iter().find(|p| key(p) == key(d)) {
                Some(p) if p.state != d.state => events.push(Event::new(
                    SOURCE,
                    obj.clone(),
                    p.state.clone(),
                    d.state.clone(),
                    format!(
                        "drive {obj}{} {} → {}",
                        d.serial
                            .as_deref()
                            .map(|s| format!(" ({s})"))
                            .unwrap_or_default(),
                        p.state,
                        d.state
                    ),
                )),
                Some(_) => {}
                None => events.push(Event::new(
                    SOURCE,
                    obj.clone(),
                    "",
                    d.state.clone(),
                    format!("drive {obj} appeared: {}", d.state),
                )),
            }
        }
        for p in &self.pds {
            if !pds
                .iter()
                .any(|d| d.controller == p.controller && d.slot == p.slot)
            {
                let obj = format!("{}/{}", p.controller, p.slot);
                events.push(Event::new(
                    SOURCE,
                    obj.clone(),
                    p.state.clone(),
                    "",
                    format!("drive {obj} removed"),
                ));
            }
        }
    }
}
