//! The collectors a configuration turns on, in report order: [`core`] (the host's own: block
//! devices, interfaces, CPU, pressure, memory) and [`storage`] (multipath, MD, zpool, hardware
//! RAID, drive health, batch jobs, file system capacity). Kept out of `collect` so that the
//! collectors, whose settings `config` holds, never import the configuration as a whole.

use std::sync::Arc;

use crate::collect::{
    book, drive, fs, hwraid, jobs, md::MdCollector, mpath::MpathCollector, zpool::ZpoolCollector,
    Collector, DiskCollector, HostCollector, NetCollector,
};
use crate::command::SystemRunner;
use crate::config::Config;

/// The collectors of the host itself, in report order: block devices, interfaces, then CPU,
/// pressure and memory. The scheduler puts them in front of the storage ones.
pub fn core(cfg: &Config) -> Vec<Box<dyn Collector>> {
    vec![
        Box::new(DiskCollector::new(cfg)),
        Box::new(NetCollector::new(cfg)),
        Box::new(HostCollector::new()),
    ]
}

/// The storage collectors the configuration enables (multipath, MD, zpool, hardware RAID, drive health,
/// batch jobs, filesystem capacity), in report order. `inline` (for `once` and stepped tests) runs slow commands on the sampling thread so
/// that one report interval already has their answers.
pub fn storage(cfg: &Config, inline: bool) -> Vec<Box<dyn Collector>> {
    let mut v: Vec<Box<dyn Collector>> = Vec::new();
    // The drive collector's readings, for the rebuild risks of the arrays and pools (see
    // book); the zpool collector's vdev leaves, for the drives' `pool` tag.
    let book = book::DriveBook::new(cfg.sys_root == std::path::Path::new("/sys"));
    if cfg.mpath.enabled {
        let runner = Arc::new(SystemRunner);
        v.push(if inline {
            Box::new(MpathCollector::new_inline(cfg.mpath.clone(), runner))
        } else {
            Box::new(MpathCollector::new(cfg.mpath.clone(), runner))
        });
    }
    if cfg.md.enabled {
        v.push(Box::new(
            MdCollector::new(cfg.md.clone(), cfg.risk).with_book(book.clone()),
        ));
    }
    if cfg.zpool.enabled {
        let runner = Arc::new(SystemRunner);
        v.push(if inline {
            Box::new(
                ZpoolCollector::new_inline(cfg.zpool.clone(), cfg.risk, runner)
                    .with_book(book.clone()),
            )
        } else {
            Box::new(
                ZpoolCollector::new(cfg.zpool.clone(), cfg.risk, runner).with_book(book.clone()),
            )
        });
    }
    // storcli reads this machine's controllers: on another sys root (a fixture, the simulator)
    // only a storcli given by path (a stand-in) is run.
    let own_controllers =
        cfg.sys_root == std::path::Path::new("/sys") || cfg.hwraid.storcli.components().count() > 1;
    if cfg.hwraid.enabled && own_controllers {
        let root = crate::root::Root::new(&cfg.proc_root, &cfg.sys_root);
        let (c, r) = (cfg.hwraid.clone(), cfg.risk);
        v.push(if inline {
            Box::new(hwraid::HwraidCollector::new_inline(c, r, root).with_book(book.clone()))
        } else {
            Box::new(hwraid::HwraidCollector::new(c, r, root).with_book(book.clone()))
        });
    }
    // The disks are named by the sys root, and smartctl reads this machine's /dev: on another
    // tree (a fixture, the simulator) only a smartctl given by path (a stand-in) is run.
    let own_disks =
        cfg.sys_root == std::path::Path::new("/sys") || cfg.drive.smartctl.components().count() > 1;
    if cfg.drive.enabled && own_disks {
        // After md: a degraded array's event of this sample has its members read at once.
        let root = crate::root::Root::new(&cfg.proc_root, &cfg.sys_root);
        v.push(if inline {
            Box::new(
                drive::DriveCollector::new_inline(cfg.drive.clone(), root)
                    .with_book(book.clone(), cfg.risk),
            )
        } else {
            Box::new(
                drive::DriveCollector::new(cfg.drive.clone(), root)
                    .with_book(book.clone(), cfg.risk),
            )
        });
    }
    if cfg.jobs.enabled {
        v.push(Box::new(jobs::JobsCollector::new(
            cfg.jobs.clone(),
            cfg.sample_interval,
            cfg.report_interval,
        )));
    }
    if cfg.fs.enabled {
        v.push(Box::new(fs::FsCollector::new(
            cfg.fs.clone(),
            crate::root::Root::new(&cfg.proc_root, &cfg.sys_root),
            cfg.report_interval,
            inline,
        )));
    }
    v
}
