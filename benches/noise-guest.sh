#!/usr/bin/env bash
# What still reaches a shielded CPU under full load, by the kernel's own
# counters, for each condition: no shield, `on 2-3`, `on 2-3 --tune=all`,
# each on a plain boot and on a boot with the line `cpushield boot-args 2-3`
# prints (the boot half). A busy loop alone on CPU 3 (inside the shield via
# `cpushield run` where there is one, else `taskset -c 3`), stress-ng on all
# CPUs; per second: local timer (tick), IPIs, device IRQs, softirqs, and the
# loop's involuntary context switches (preempted). Busybox guests, 4 vCPUs.
#   benches/noise-guest.sh            (KERNELS="6.1 6.12 7", NOISE_SECS=20)
# As root, with QEMU (tests/vm/ci.sh --install-only). Nothing on this
# machine is changed: every shield is inside a guest.
set -euo pipefail
cd "$(dirname "$0")/.."
KERNELS=${KERNELS:-6.1 6.12 7}
LINE="isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1"
out=$(mktemp)
for k in $KERNELS; do
    for append in "" "$LINE"; do
        tests/vm/run.sh --no-build --kernel "$k" ${append:+--append "$append"} \
            --timeout 600 noise-counters >"$out.log" 2>&1 || true
        grep -o '\[[^]]*\] NOISE .*' "$out.log" | sort -u >>"$out" || true
    done
done
echo "| kernel | boot | condition | tick | IPIs | device IRQs | softirqs | preempted | counts in the window |"
echo "|---|---|---|---|---|---|---|---|---|"
sed 's/^\[\([^]]*\)\] NOISE /| \1 | /; s/$/ |/' "$out"
rm -f "$out" "$out.log"
