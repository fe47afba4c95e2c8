//! The measuring loops take no page fault, also without mlockall
//! (`--no-rt`): the histogram is written page by page when it is made.
//! Each probe first runs with a small histogram (to touch the code, the
//! vDSO and the stack), then with 40 MB of buckets: past glibc's largest
//! mmap threshold (32 MB), that memory comes fresh from the kernel, and
//! only the histogram's own prefaulting maps it before the loop. The
//! thread's minor faults are read around that second run. Only this
//! test's own thread runs; nothing of the machine is changed.

#[path = "common/loops.rs"]
mod loops;

fn minor_faults() -> i64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_THREAD)
        .expect("getrusage of the calling thread")
        .minor_page_faults()
}

#[test]
fn no_probe_loop_takes_a_page_fault() {
    cpushield::measure::probes::prefault_stack();
    for (probe, samples, interval_ns) in loops::probes() {
        loops::run(loops::job(probe, samples, interval_ns, 1000));
        let job = loops::job(probe, samples, interval_ns, 5_000_000);
        let before = minor_faults();
        let out = loops::run(job);
        let faults = minor_faults() - before;
        println!(
            "{}: {} iterations, {faults} minor faults",
            probe.name(),
            out.iterations
        );
        assert_eq!(faults, 0, "{} took page faults in its loop", probe.name());
    }
}
