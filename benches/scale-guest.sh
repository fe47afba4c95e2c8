#!/usr/bin/env bash
# cpushield against tuna and cset at scale, in one boot of the Debian 12
# test-bed guest (systemd, irqbalance and tuned as Debian ships them, plus
# tuna 0.15 and cset 1.6 from Debian): a holder service of THREADS threads
# and 500 sleep processes; ROUNDS rounds of each tool's shield of CPUs 2-3
# and its undo; then cpushield alone at each of SIZES threads (on, status,
# off). Prints the tables; nothing changes on this machine (the guest
# boots a throw-away copy of the image).
#
# Usage: benches/scale-guest.sh
#        THREADS=10000 ROUNDS=3 SIZES="1000 10000 30000" CPUS=4 benches/scale-guest.sh
#        PROFILE=1 ...   one more on/off under strace -c -f
#        TOOLS=cpushield SIZES= ...   cpushield only, no sizes
#        HOLD=22 ...   each shield held 22 s, and 22 s between rounds (every
#                      tool, every size): Debian 12's irqbalance then answers
#                      its socket (it does not for up to two 10 s cycles
#                      after a ban change)
# Needs root and QEMU (tests/vm/ci.sh --install-only) and Debian's mirror
# for the first image build. Takes 10-25 minutes under TCG.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-10000}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES-1000 10000 30000}
TOOLS=${TOOLS:-cpushield cset tuna}
CPUS=${CPUS:-4}
TARGET=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release
export RUSTFLAGS='-C target-feature=+crt-static'
# the binary and the tools (tools/: idle_tasks) in one call
cargo build --release --quiet --target x86_64-unknown-linux-gnu --workspace --bins

timeout=$((900 + (120 + 2 * ${HOLD:-0}) * ROUNDS * $(echo "$TOOLS" | wc -w) + (300 + 6 * ${HOLD:-0}) * $(echo "$SIZES" | wc -w)))
tests/vm/distro/run.sh --suite bookworm --cpus "$CPUS" --memory 3072 \
    --packages tuna,cpuset,strace --timeout "$timeout" \
    --set "SCALE_THREADS=$THREADS" --set "SCALE_ROUNDS=$ROUNDS" \
    --set "SCALE_SIZES=$SIZES" --set "SCALE_TOOLS=$TOOLS" \
    --set "SCALE_PROFILE=${PROFILE:-0}" --set "SCALE_HOLD=${HOLD:-0}" \
    --set "SCENARIO_TIMEOUT=$timeout" \
    scale | tee /dev/stderr | sed -n 's/^==== summary (\(.*\))$/\1/p' >"${TMPDIR:-/tmp}/scale-guest.dir" || true
dir=$(cat "${TMPDIR:-/tmp}/scale-guest.dir")
res=$dir/results/bookworm-v2/scale
[ -s "$res/rounds.tsv" ] || [ -s "$res/sizes.tsv" ] || { echo "scale-guest: no results in $res" >&2; exit 1; }

grep -h '^CPUSHIELD-NOTE: scale: systemctl daemon-reload' "$dir"/bookworm-v2.log | sed 's/^CPUSHIELD-NOTE: scale: /  /'
if [ -s "$res/rounds.tsv" ]; then
echo
echo "== $(grep 'tasks in all' "$dir"/bookworm-v2.log | tail -n1 | sed 's/.*holder: //'), $CPUS vCPUs (TCG), shield 2-3, $ROUNDS rounds, each shield held ${HOLD:-0} s"
# median of the values on stdin
awk -F'\t' '
function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    if (!($1 in seen)) { order[++n] = $1; seen[$1] = 1 }
    on[$1] = on[$1] " " $3; off[$1] = off[$1] " " $4; sum[$1] = sum[$1] " " ($3 + $4)
    if ($5 != 0 || $6 != 0) fails[$1] = fails[$1] " " $2 ":" $5 "/" $6
    if ($7 > left[$1]) left[$1] = $7
}
END {
    printf "%-10s %9s %9s %9s %9s %9s %s\n", "tool", "on", "off", "on+off", "ratio", "on/off", "threads left on 2-3 (most)"
    base = median(sum["cpushield"])
    for (i = 1; i <= n; i++) {
        t = order[i]; s = median(sum[t])
        printf "%-10s %7.2f s %7.2f s %7.2f s %8.1fx %8.1fx %d%s\n", t, median(on[t]), median(off[t]), s,
            (base > 0 ? s / base : 0), (median(off[t]) > 0 ? median(on[t]) / median(off[t]) : 0), left[t] + 0,
            (fails[t] != "" ? "   (exit codes on/off of failed rounds:" fails[t] ")" : "")
    }
}' "$res/rounds.tsv"
fi

if [ -s "$res/sizes.tsv" ]; then
    echo
    echo "== cpushield alone by size (medians of 3 rounds; per thread = time / tasks)"
    awk -F'\t' '
    function median3(a, b, c) { return a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b)) }
    { k = $1; r[k, $2, "on"] = $3; r[k, $2, "off"] = $4; r[k, $2, "st"] = $5; tasks[k] = $8; if (!(k in seen)) { order[++n] = k; seen[k] = 1 } }
    END {
        printf "%-8s %7s %9s %9s %9s %12s %12s %12s\n", "threads", "tasks", "on", "status", "off", "on/task", "status/task", "off/task"
        for (i = 1; i <= n; i++) {
            k = order[i]
            on = median3(r[k, 1, "on"], r[k, 2, "on"], r[k, 3, "on"])
            st = median3(r[k, 1, "st"], r[k, 2, "st"], r[k, 3, "st"])
            off = median3(r[k, 1, "off"], r[k, 2, "off"], r[k, 3, "off"])
            printf "%-8s %7d %7.2f s %7.2f s %7.2f s %9.1f us %9.1f us %9.1f us\n", k, tasks[k], on, st, off,
                on / tasks[k] * 1e6, st / tasks[k] * 1e6, off / tasks[k] * 1e6
        }
    }' "$res/sizes.tsv"
fi
echo
echo "results: $res"
