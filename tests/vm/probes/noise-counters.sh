#!/bin/sh
# summary: what reaches CPU 3 under load, per condition (no shield, on, on --tune, a FIFO 80 poller with and without the starvation guard), by the kernel's counters (records notes; benches/noise-guest.sh)
# vm: cpus=4
# Run: benches/noise-guest.sh (both boot lines, every kernel), or
#      tests/vm/run.sh --no-build [--append 'BOOT LINE'] noise-counters
. /guest/lib.sh "$1"
SECS=${NOISE_SECS:-20}
boot=plain
grep -qw 'nohz_full=2-3' /proc/cmdline && boot=isolated
has_cpushield || { bad "cpushield binary in the guest"; result; }
row() { note "NOISE $boot | $1 | $N_TICK | $N_IPI | $N_DEV | $N_SOFT | $N_PREEMPT | ${N_WHAT:-none}"; }
# stress-ng on every CPU: the shield confines it to the housekeeping ones.
stress-ng --cpu 4 --io 2 --vm 2 --vm-bytes 32M --hdd 1 --hdd-bytes 16M --timeout $((5 * SECS + 90)) >/dev/null 2>&1 &
LOAD=$!
sleep 2
noise_on_cpu 3 "$SECS" taskset -c 3; row "no shield"
cs on 2-3; check "on 2-3 exits 0" [ "$CS_RC" -eq 0 ]
noise_on_cpu 3 "$SECS" cpushield run --cpu 3 --; row "on 2-3"
cs off; cs on 2-3 --tune=all; check "on 2-3 --tune=all exits 0" [ "$CS_RC" -eq 0 ]
noise_on_cpu 3 "$SECS" cpushield run --cpu 3 --; row "on 2-3 --tune=all"
# A SCHED_FIFO 80 poller instead of the plain loop, with the starvation
# guard (where the kernel needs it: rt-throttling turns throttling off) and
# without it: what the guard's boosts cost the poller, in its counters and
# in the guard's own account (boosts per second, CPU time each).
gstat() { json_get /run/cpushield/guard.json "$1" 2>/dev/null; }
for guard in auto off; do
    cs off; cs on 2-3 --tune=all,rt-throttling --guard $guard
    check "on 2-3 --tune=all,rt-throttling --guard $guard exits 0" [ "$CS_RC" -eq 0 ]
    b0=$(gstat .boosts); r0=$(gstat .ran_us)
    noise_on_cpu 3 "$SECS" cpushield run --cpu 3 --fifo 80 --
    b1=$(gstat .boosts); r1=$(gstat .ran_us)
    nb=$(( ${b1:-0} - ${b0:-0} )); nr=$(( ${r1:-0} - ${r0:-0} ))
    G="guard off"
    [ -n "$b1" ] && G="guard: $(awk -v n=$nb -v s=$SECS 'BEGIN { printf "%.2f", n / s }') boosts/s, $( [ $nb -gt 0 ] && echo $((nr / nb)) || echo 0) µs each"
    row "on 2-3 --tune=all,rt-throttling, FIFO 80 poller, $G"
done
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
result
