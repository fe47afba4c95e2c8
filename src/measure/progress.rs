//! What a measuring thread tells the main thread while it runs: its
//! sample count, its largest sample, the largest since the main thread
//! last asked (the per-second maxima), and on request a copy of its
//! histogram (the checkpoints and the progress line's percentiles).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

use super::histogram::Histogram;

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
    /// Set by the main thread to ask for a copy of the histogram, cleared
    /// by the measuring thread once it has made one.
    want_copy: AtomicBool,
    /// The latest copy, allocated before the loop starts
    /// ([`Progress::prepare_copy`]) so that copying never allocates; the
    /// measuring thread only ever tries the lock, so it never waits.
    copy: Mutex<Option<Histogram>>,
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

    /// Allocates the copy of a histogram of `buckets` × `width_ns`, before
    /// the measuring thread starts; without it no copy is ever made.
    pub fn prepare_copy(&self, buckets: usize, width_ns: u64) {
        *self.copy.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Histogram::new(buckets, width_ns));
    }

    /// Asks the measuring thread for a copy of its histogram, made after
    /// its next sample, outside the timed part of its loop.
    pub fn ask_copy(&self) {
        self.want_copy.store(true, Release);
    }

    /// Called by the measuring thread between samples: copies `hist` when
    /// asked (one load otherwise).
    #[inline]
    pub(super) fn offer(&self, hist: &Histogram) {
        if self.want_copy.load(Relaxed) {
            self.give(hist);
        }
    }

    #[cold]
    fn give(&self, hist: &Histogram) {
        if let Ok(mut slot) = self.copy.try_lock() {
            if let Some(copy) = slot.as_mut() {
                copy.copy_reached_from(hist);
            }
            self.want_copy.store(false, Release);
        }
    }

    /// `f` of the copy made since the last [`Progress::ask_copy`]; `None`
    /// while it is still asked for, or when no copy was prepared.
    pub fn with_copy<R>(&self, f: impl FnOnce(&Histogram) -> R) -> Option<R> {
        if self.want_copy.load(Acquire) {
            return None;
        }
        let slot = self.copy.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_made_only_when_asked_and_read_once_made() {
        let p = Progress::default();
        let mut h = Histogram::new(10, 1000);
        h.record(0, 2500);
        // nothing prepared: no copy, and asking cannot make one
        p.ask_copy();
        p.offer(&h);
        assert_eq!(p.with_copy(|c| c.samples()), None);
        p.prepare_copy(10, 1000);
        p.offer(&h);
        assert_eq!(p.with_copy(|c| c.samples()), Some(0), "not asked again");
        p.ask_copy();
        assert_eq!(p.with_copy(|c| c.samples()), None, "asked, not yet made");
        h.record(1, 7000);
        p.offer(&h);
        assert_eq!(
            p.with_copy(|c| (c.samples(), c.max_ns())),
            Some((2, Some(7000)))
        );
    }
}
