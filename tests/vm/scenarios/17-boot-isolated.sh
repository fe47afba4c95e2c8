#!/bin/sh
# summary: on a kernel booted with cpushield's boot line (nohz_full, rcu_nocbs, isolcpus=managed_irq), on 2-3 --tune holds, run works, off restores; the busy loop's CPU 3 gets no tick
# vm: cpus=4 boot=isolated
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
check "the kernel booted with nohz_full=2-3 ($(cat /proc/cmdline))" grep -qw 'nohz_full=2-3' /proc/cmdline
check "nohz_full reads 2-3" [ "$(cat /sys/devices/system/cpu/nohz_full)" = 2-3 ]
snap before
cs boot-args $SH
check "boot-args prints the line this kernel booted with" grep -q 'isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1' "$OUT/cs.stdout"
cs status; check "status before on exits 0" [ "$CS_RC" -eq 0 ]
check "status names 2-3 as isolated at boot only" grep -Eq 'isolated at boot only +2-3' "$OUT/cs.stdout"
cs on $SH --tune=all; check "on $SH --tune=all exits 0" [ "$CS_RC" -eq 0 ]
part=$(v2_partitions | awk '{ print $1 " " $3 }' | head -n1)
check "the shield is an isolated partition ($part)" sh -c "echo '$part' | grep -q ' isolated\$'"
cs status; check "status exits 0 (holds)" [ "$CS_RC" -eq 0 ]
check "status: CPUs 2-3 shielded and isolated at boot" grep -Eq 'shielded and isolated at boot +2-3' "$OUT/cs.stdout"
taskset -c 3 sh -c 'exit 0' 2>/dev/null; rc=$?
check "a new process outside the shield asking for CPU 3 is refused (taskset exit $rc)" [ "$rc" -ne 0 ]
cs run --cpu 3 -- sh -c 'grep Cpus_allowed_list /proc/self/status'
check "run --cpu 3: CMD on CPU 3 only" grep -q '^Cpus_allowed_list:[[:space:]]*3$' "$OUT/cs.stdout"

# What still reaches CPU 3 under load, per the kernel's own counters: a busy
# loop alone there inside the shield, stress-ng on every CPU (the shield
# confines it to 0-1). The bound is at most 1 tick, 1 IPI and 1
# softirq a second: 6.1 and 7.x reach 0. Debian's 6.12 does not reach it
# with any boot line: booted with the older line (isolcpus' domain flag, no
# shield, the load kept off by the domain isolation) it left 1.55 ticks,
# 2.55 IPIs and 0.7 softirqs a second here (benches/noise-guest.sh and
# KERNEL-NOTES.md), and so does this line with the shield; its bounds are
# twice that floor. Its softirqs there are the TIMER softirqs its ticks
# raise (a CI run: LOC 31, softirq TIMER 30 in 20 s), so they are held to
# the tick's bound.
stress-ng --cpu 4 --io 1 --vm 1 --vm-bytes 32M --timeout 70 >/dev/null 2>&1 &
LOAD=$!
sleep 3
noise_on_cpu 3 20 cpushield run --cpu 3 --
kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
note "boot line + on 2-3 --tune=all, busy loop on CPU 3, stress-ng: $NOISE_LINE"
case $KSERIES in
    6.12) MAX_TICK=3 MAX_IPI=5 MAX_SOFT=3 ;;
    # IPIs: 7.3 showed 0 to 1.1 a second, all function-call IPIs (CAL);
    # 1.65 (CAL 22) in a CI run with a second guest and a build beside it
    *) MAX_TICK=1 MAX_IPI=2 MAX_SOFT=1 ;;
esac
check "tick on CPU 3 at most $MAX_TICK/s ($N_TICK)" le "$N_TICK" $MAX_TICK
check "IPIs on CPU 3 at most $MAX_IPI/s ($N_IPI)" le "$N_IPI" $MAX_IPI
check "device IRQs on CPU 3: none ($N_DEV)" le "$N_DEV" 0
check "softirqs on CPU 3 at most $MAX_SOFT/s ($N_SOFT)" le "$N_SOFT" $MAX_SOFT
check "the loop preempted at most 0.1/s ($N_PREEMPT)" le "$N_PREEMPT" 0.1

cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
snap after
snap_equal before after "off restores everything exactly"
result
