//! What a measuring thread tells the main thread while it runs: its
//! sample count, its largest sample, and the largest since the main thread
//! last asked (the per-second maxima).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Live progress of one measuring thread, read by the main thread. Each
/// sits on a cache-line pair of its own (x86 fetches lines in pairs): the
/// measuring threads of neighbouring CPUs write theirs without sharing a
/// line, and the main thread's reads invalidate only the one it reads.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Progress {
    /// Samples recorded so far.
    pub samples: AtomicU64,
    /// Largest sample so far, ns.
    pub max_ns: AtomicU64,
    /// Largest sample since the main thread last took it, ns (the
    /// block maxima `certify` fits).
    pub window_max_ns: AtomicU64,
}

impl Progress {
    /// Publishes the count, the running maximum, and `window_ns`, the
    /// largest sample since the last call; the read-modify-write happens
    /// only when that raises the window's maximum, so a quiet loop costs
    /// one load more than before.
    #[inline]
    pub(super) fn publish(&self, samples: u64, max_ns: u64, window_ns: u64) {
        self.samples.store(samples, Relaxed);
        self.max_ns.store(max_ns, Relaxed);
        if window_ns > self.window_max_ns.load(Relaxed) {
            self.window_max_ns.fetch_max(window_ns, Relaxed);
        }
    }

    /// The largest sample since the last call, ns (0 when none), and a
    /// new window begun.
    pub fn take_window_max(&self) -> u64 {
        self.window_max_ns.swap(0, Relaxed)
    }
}
