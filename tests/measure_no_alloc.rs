//! The measuring loops allocate nothing: each probe that needs no device
//! runs a few thousand iterations on this thread under a counting global
//! allocator (allocation-counter, per thread). SCHED_OTHER, no mlockall:
//! only this test's own thread runs, nothing of the machine is changed.
//! The rtc probe needs /dev/rtc, which a test must not assume; the guest
//! scenario runs it against a real RTC.

#[path = "common/loops.rs"]
mod loops;

#[test]
fn no_probe_loop_allocates() {
    for (probe, samples, interval_ns) in loops::probes() {
        let job = loops::job(probe, samples, interval_ns, 100_000);
        let mut iterations = 0;
        let counted = allocation_counter::measure(|| iterations = loops::run(job).iterations);
        println!(
            "{}: {iterations} iterations, {} allocations",
            probe.name(),
            counted.count_total
        );
        assert!(
            iterations >= samples,
            "{}: {iterations} iterations",
            probe.name()
        );
        assert_eq!(
            counted.count_total,
            0,
            "{} allocated in its loop",
            probe.name()
        );
    }
}

/// With `--explain`, a loop hands every slow sample over a channel made
/// beforehand: still no allocation, and every sample arrives.
#[test]
fn reporting_slow_samples_allocates_nothing() {
    use cpushield::measure::explain::SlowSamples;
    let samples = 2000;
    for probe in [
        cpushield::measure::ProbeKind::Timer,
        cpushield::measure::ProbeKind::Periodic,
    ] {
        let mut job = loops::job(probe, samples, 100_000, 100_000);
        // Threshold 0: every sample is slow.
        let (slow, rx) = SlowSamples::channel(0, samples as usize + 16);
        job.slow = Some((0, slow.clone()));
        let counted = allocation_counter::measure(|| {
            loops::run(job);
        });
        let reported = rx.try_iter().count() as u64;
        println!(
            "{}: {reported} slow samples reported, {} allocations",
            probe.name(),
            counted.count_total
        );
        assert_eq!(counted.count_total, 0, "{} allocated", probe.name());
        assert!(
            reported >= samples - 1,
            "{}: {reported} reported",
            probe.name()
        );
        assert_eq!(slow.dropped(), 0);
    }
}

/// The counter does count: an allocation on this thread is seen.
#[test]
fn the_allocation_counter_counts() {
    let counted = allocation_counter::measure(|| {
        std::hint::black_box(vec![1u64, 2, 3]);
    });
    assert_eq!(counted.count_total, 1);
}
