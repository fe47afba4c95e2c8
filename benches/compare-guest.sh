#!/usr/bin/env bash
# `cpushield compare` in the real-kernel test guest, RUNS times, to track
# the shield's effect over time.
#
# Each run is its own boot of the QEMU guest (tests/vm/run.sh, scenario 09
# on 2 vCPUs, 10 on 4): ratios are only comparable within one boot (the
# timing is TCG software emulation), and separate boots show how much they
# swing between identical runs, which three compares in one boot would
# hide (they would share the guest's page cache, slab and timer state).
# A boot costs ~10 s on top of the ~45 s compare.
#
# Every run appends one line to benches/results/compare-guest-YYYYMMDD.tsv
# (created with a header) and prints it: date, commit, kernel, vCPUs,
# measured CPUs, load, seconds per phase, the per-phase samples / max /
# p99.9 / counts over 100 µs and 1 ms, the ratios unshielded/shielded and
# shielded/idle for max, p99.9 and both counts, and the host's load
# (1-minute load average before and after, other QEMU processes running):
# other guests on the same host distort every figure.
#
# Usage: benches/compare-guest.sh [--kernel 6.12] [--scenarios 09,10]
#            [--runs 3] [--duration 10] [--load full] [--binary PATH]
# Needs what tests/vm/run.sh needs (tests/vm/ci.sh --install-only). Nothing
# on this machine is changed: the shield exists only inside the guest.
set -euo pipefail
cd "$(dirname "$0")/.."

KERNEL=6.12; SCENS=09,10; RUNS=3; DURATION=10; LOAD=full; BINARY=""
while [ $# -gt 0 ]; do
    case $1 in
        --kernel) KERNEL=$2; shift ;;
        --scenarios) SCENS=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --load) LOAD=$2; shift ;;
        --binary) BINARY=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [ -z "$BINARY" ]; then
    RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
        cargo build --quiet --release --target x86_64-unknown-linux-gnu
    BINARY=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/cpushield
fi
OUT=benches/results/compare-guest-$(date +%Y%m%d).tsv
COLS="date commit kernel vcpus target load duration_s run result
idle_samples unshielded_samples shielded_samples
idle_max_us unshielded_max_us shielded_max_us
idle_p999_us unshielded_p999_us shielded_p999_us
idle_over100 unshielded_over100 shielded_over100
idle_over1000 unshielded_over1000 shielded_over1000
ratio_us_max ratio_si_max ratio_us_p99.9 ratio_si_p99.9
ratio_us_over100us ratio_si_over100us ratio_us_over1ms ratio_si_over1ms
host_load1_before host_load1_after host_other_qemu"
[ -s "$OUT" ] || echo $COLS | tr ' ' '\t' >"$OUT"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
load1() { cut -d' ' -f1 /proc/loadavg; }

status=0
for scen in ${SCENS//,/ }; do
    for run in $(seq 1 "$RUNS"); do
        before=$(load1)
        others=$(pgrep -c qemu-system || true)
        log=$(mktemp)
        rc=0
        tests/vm/run.sh --no-build --binary "$BINARY" --kernel "$KERNEL" \
            --timeout $((180 + 3 * DURATION * 3)) \
            --append "cpushield.compare_duration=$DURATION cpushield.compare_load=$LOAD" \
            "$scen" >"$log" 2>&1 || rc=$?
        after=$(load1)
        dir=$(sed -n 's/^==== summary (\(.*\))$/\1/p' "$log")
        line=$(cat "$dir"/*.log 2>/dev/null | grep -h '^CPUSHIELD-COMPARE:' | tail -n1 || true)
        result=$(awk '$2 ~ /^[0-9]/ { print $3; exit }' "$dir/summary.txt" 2>/dev/null || true)
        [ $rc = 0 ] || status=1
        echo "$line" | tr ' ' '\n' | awk -F= -v cols="$COLS" -v date="$(date -u +%FT%TZ)" \
            -v commit="$commit" -v run="$run" -v result="${result:-NONE}" -v dur="$DURATION" \
            -v b="$before" -v a="$after" -v q="$others" -v load="$LOAD" '
            NF == 2 { v[$1] = $2 }
            END {
                v["date"] = date; v["commit"] = commit; v["run"] = run; v["result"] = result
                v["vcpus"] = v["cpus"]; v["duration_s"] = dur; if (v["load"] == "") v["load"] = load
                v["host_load1_before"] = b; v["host_load1_after"] = a; v["host_other_qemu"] = q
                n = split(cols, c, /[ \n]+/); out = ""
                for (i = 1; i <= n; i++) {
                    k = c[i]; if (k == "") continue
                    key = k; sub(/_us$/, "", key); if (key ~ /^(idle|unshielded|shielded)_(max|p999)$/) k2 = key; else k2 = k
                    val = (k in v) ? v[k] : ((k2 in v) ? v[k2] : "-")
                    out = out (out == "" ? "" : "\t") val
                }
                print out
            }' | tee -a "$OUT"
        [ -n "$line" ] || { echo "run $run of $scen gave no figures (run.sh exit $rc, log in ${dir:-?}):"; tail -n 20 "$log"; }
        rm -f "$log"
    done
done
echo "appended to $OUT"
exit $status
