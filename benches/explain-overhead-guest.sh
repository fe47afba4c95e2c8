#!/usr/bin/env bash
# What `measure --explain` costs the timer probe it explains: rounds of
# `measure --cpus 3` without and with `--explain 100` alternate on the same
# CPU, same length (OVERHEAD_SECS, default 10 s; OVERHEAD_ROUNDS, default 4),
# in a busybox guest per kernel; prints each round's min and avg and the
# medians' difference. As root, with QEMU (tests/vm/ci.sh --install-only).
# Nothing on this machine is traced: tracefs is written inside the guests.
#   benches/explain-overhead-guest.sh          (KERNELS="6.1 6.12 7")
set -euo pipefail
cd "$(dirname "$0")/.."
KERNELS=${KERNELS:-6.1 6.12 7}
for k in $KERNELS; do
    log=$(mktemp)
    tests/vm/run.sh --no-build --kernel "$k" --timeout 900 explain-overhead >"$log" 2>&1 || true
    echo "== kernel $k (µs; timer probe, 1 ms interval, CPU 3, idle guest)"
    grep -o 'OVERHEAD .*' "$log" | sort -u | awk -F' [|] ' '
        { split($1, a, " "); mode = $2; min[mode] = min[mode] " " $3; avg[mode] = avg[mode] " " $4
          printf "round %s %-8s min %8s avg %8s\n", a[2], mode, $3, $4 }
        function median(s,   n, v, i, j, t) {
            n = split(s, v, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        END {
            mp = median(min["plain"]); me = median(min["explain"])
            ap = median(avg["plain"]); ae = median(avg["explain"])
            printf "median   plain    min %8.1f avg %8.1f\n", mp, ap
            printf "median   explain  min %8.1f avg %8.1f\n", me, ae
            printf "explain - plain:  min %+.1f µs, avg %+.1f%%\n", me - mp, (ap > 0 ? 100 * (ae - ap) / ap : 0)
        }'
    rm -f "$log"
done
