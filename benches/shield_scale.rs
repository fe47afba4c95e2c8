//! How long `on` + `off` take on a fixture of 10,000 threads and 500 IRQs.
//! Prints figures; asserts nothing about time (target: well under a second).
//!
//! Run: `cargo bench --bench shield_scale`

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use cpushield::shield::{self, plan::Request};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureBuilder, FixtureConfig, FixtureTask};
use cpushield::CpuSet;

const THREADS: i32 = 10_000;
const THREADS_PER_PROCESS: i32 = 10;
const IRQS: u32 = 500;

fn main() {
    for layout in [CgroupLayout::V2, CgroupLayout::V1] {
        // A RAM file system, like /proc and /sys: measures our code, not ext4.
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("temp dir");
        let sys = FixtureBuilder::new(dir.path(), 8)
            .layout(layout)
            .config(FixtureConfig::default())
            .build()
            .expect("fixture");
        let all = CpuSet::first_n(8);
        let mut pid = 1000;
        while pid < 1000 + THREADS {
            let tasks: Vec<FixtureTask> = (0..THREADS_PER_PROCESS)
                .map(|i| FixtureTask {
                    name: format!("worker{i}"),
                    flags: 0,
                    cpus: all.clone(),
                })
                .collect();
            fixture::add_process(&sys, pid, &tasks).expect("process");
            pid += THREADS_PER_PROCESS;
        }
        for irq in 0..IRQS {
            fixture::add_irq(&sys, irq, &format!("dev{irq}"), "0-7").expect("irq");
        }
        let req = Request {
            cpus: CpuSet::parse_list("4-7").unwrap(),
            ..Default::default()
        };
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let on = shield::on(&sys, &req, false, &stop).expect("on");
        let t_on = t0.elapsed();
        let t1 = Instant::now();
        let off = shield::off(&sys).expect("off");
        let t_off = t1.elapsed();
        assert!(off.undone.failed.is_empty(), "{:?}", off.undone.failed);
        println!(
            "{:<4} {THREADS} threads, {IRQS} IRQs: on {:>7.1} ms ({} changes), off {:>7.1} ms ({} restored), total {:>7.1} ms",
            match layout {
                CgroupLayout::V2 => "v2",
                _ => "v1",
            },
            t_on.as_secs_f64() * 1e3,
            on.changed,
            t_off.as_secs_f64() * 1e3,
            off.undone.restored,
            (t_on + t_off).as_secs_f64() * 1e3,
        );
    }
}
