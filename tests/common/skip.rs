//! Tests that cannot run here say so; in CI a skip is a failure unless CI
//! said beforehand that this machine lacks the thing (`.ci/run` prints why
//! and lists the key in `CPUSHIELD_EXPECTED_SKIPS`).

/// Reports a skip of what `key` names (`rtc`, `sched_fifo`, `stress-ng`)
/// for `reason`, and fails under `CI=true` when CI did not expect it.
pub fn skip(key: &str, reason: &str) {
    println!("skipped ({key}): {reason}");
    if std::env::var("CI").as_deref() != Ok("true") {
        return;
    }
    let expected = std::env::var("CPUSHIELD_EXPECTED_SKIPS").unwrap_or_default();
    assert!(
        expected.split(',').any(|k| k.trim() == key),
        "a test skipped in CI ({key}: {reason}) that CI did not expect \
         (CPUSHIELD_EXPECTED_SKIPS={expected:?}); install what it needs, or make \
         .ci/run say why this machine cannot"
    );
}
