#!/usr/bin/env bash
# Whether a long measurement's memory stays flat: `cpushield measure` (the
# probe certify runs in its shield) on one CPU for SHORT and LONG seconds,
# its resident memory (VmRSS) read every minute, printed per run with the
# samples it took. Only this measurement's own threads are pinned and
# prioritised (SCHED_FIFO 99 on CPU, 1 kHz timer probe); nothing else on
# the machine changes, so it may run on any machine, as root.
#   benches/measure-memory.sh                 (CPU=1 SHORT=600 LONG=3600)
#   BIN=target/release/cpushield benches/measure-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/cpushield}
CPU=${CPU:-1}
[ -x "$BIN" ] || cargo build --release --bin cpushield
for secs in ${SHORT:-600} ${LONG:-3600}; do
    out=$(mktemp)
    "$BIN" measure --cpus "$CPU" --duration "$secs" --json >"$out" &
    pid=$!
    first="" last=""
    # the first reading a minute in: before that the process is still
    # allocating its histograms and locking its memory
    while kill -0 $pid 2>/dev/null; do
        sleep 60
        rss=$(awk '/^VmRSS/ { print $2 }' /proc/$pid/status 2>/dev/null || true)
        [ -n "$rss" ] && { first=${first:-$rss}; last=$rss; }
    done
    wait $pid
    samples=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["results"][0]["cpus"][0]["stats"]["samples"], len(j["results"][0]["cpus"][0]["per_second_max_ns"]))' "$out")
    printf '%6d s: VmRSS %s kB after the first minute, %s kB at the last; samples and per-second maxima: %s\n' \
        "$secs" "$first" "$last" "$samples"
    rm -f "$out"
done
