#!/bin/sh
# summary: on --max-idle-latency bounds the shielded CPUs' PM QoS resume latency on a real kernel (the housekeeping CPUs keep theirs), the kernel reads the bound back, status names a CPU someone freed and on repairs it, a bound of 0 is written as n/a (polling only) and comes back as 0; where the kernel exposes cpuidle states, the held-off states are not entered while the bound holds; off gives back exactly the snapshot before on
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
SH=2-3
QOS=/sys/devices/system/cpu/cpu%s/power/pm_qos_resume_latency_us
qos() { cat "$(printf $QOS "$1")" 2>/dev/null; }
# entries CPU BOUND: how many times CPU entered a cpuidle state slower than BOUND µs
entries() {
    local n=0 st
    for st in /sys/devices/system/cpu/cpu$1/cpuidle/state*; do
        [ -d "$st" ] || continue
        [ "$(cat "$st/latency")" -gt "$2" ] && n=$((n + $(cat "$st/usage")))
    done
    echo $n
}
# slow_states CPU BOUND: the names of its states slower than BOUND µs
slow_states() {
    local st
    for st in /sys/devices/system/cpu/cpu$1/cpuidle/state*; do
        [ -d "$st" ] && [ "$(cat "$st/latency")" -gt "$2" ] && cat "$st/name"
    done | tr '\n' ' '
}
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ -e "$(printf $QOS 3)" ] || skip "this kernel has no per-CPU PM QoS file ($(printf $QOS 3))"
custom_state
info "cpuidle driver: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none); CPU 3 states: $(ls /sys/devices/system/cpu/cpu3/cpuidle 2>/dev/null | tr '\n' ' ')"
note "cpuidle under this guest: driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none), $(ls -d /sys/devices/system/cpu/cpu3/cpuidle/state* 2>/dev/null | wc -l) states on CPU 3; PM QoS of CPU 3 reads $(qos 3)"
snap before
Q0=$(qos 0); Q3=$(qos 3)

# 1. A bound of 10 µs on the shield only.
cs on $SH --max-idle-latency 10us; check "on $SH --max-idle-latency 10us exits 0" [ "$CS_RC" -eq 0 ]
check "the kernel reads CPU 2's bound back as 10" [ "$(qos 2)" = 10 ]
check "the kernel reads CPU 3's bound back as 10" [ "$(qos 3)" = 10 ]
check "housekeeping CPU 0 keeps its own ($Q0)" [ "$(qos 0)" = "$Q0" ]
check "on's report says how CPU 3 is held" grep -q 'CPU 3 ≤ 10 µs by PM QoS' "$OUT/cs.out"
cs status; check "status: the shield holds (exit 0)" [ "$CS_RC" -eq 0 ]
check "status shows the idle-state row" grep -q 'idle-states.*CPU 2 ≤ 10 µs' "$OUT/cs.out"
# Where cpuidle exposes states over the bound, the kernel must not enter them.
if [ -n "$(slow_states 3 10)" ]; then
    u0=$(entries 3 10); sleep 3; u1=$(entries 3 10)
    check "CPU 3 entered no state over 10 µs ($(slow_states 3 10)) in 3 s ($u0 -> $u1 entries)" [ "$u0" = "$u1" ]
else
    info "no cpuidle state over 10 µs on CPU 3 here ($(slow_states 3 0)): entries not counted"
fi
# Someone lifts CPU 3's bound: status says so, on repairs it in place.
echo 0 >"$(printf $QOS 3)"
cs status; check "status with CPU 3's bound lifted: exit 3" [ "$CS_RC" -eq 3 ]
check "status names CPU 3 (idle-states)" grep -q "CPU 3 may enter\|CPU 3's pm_qos_resume_latency_us reads 0 (no bound)" "$OUT/cs.out"
cs on $SH --max-idle-latency 10us; check "on again repairs it (exit 0)" [ "$CS_RC" -eq 0 ]
check "CPU 3's bound is 10 again" [ "$(qos 3)" = 10 ]
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "CPU 3's bound is back ($Q3)" [ "$(qos 3)" = "$Q3" ]
snap after1
snap_equal before after1 "on --max-idle-latency 10us, lifted, repaired, off: the snapshot equals the one before on"

# 2. A bound of 0: polling only, written as n/a (0 means no bound). Where
# a cpuidle driver is loaded (not under TCG: no ACPI C-states, no MWAIT,
# and haltpoll needs KVM), the kernel's own counts prove it: CPU 3 enters its haltpoll state while unbounded, never while
# bounded, and housekeeping CPU 1 still does.
SLOW0=$(slow_states 3 0)
if [ -n "$SLOW0" ]; then
    u0=$(entries 3 0); sleep 3; u1=$(entries 3 0)
    check "before the shield, idle CPU 3 enters $SLOW0($u0 -> $u1 in 3 s)" [ "$u1" -gt "$u0" ]
fi
cs on 3 --max-idle-latency 0; check "on 3 --max-idle-latency 0 exits 0" [ "$CS_RC" -eq 0 ]
check "the kernel reads CPU 3's bound as n/a" [ "$(qos 3)" = n/a ]
if [ -n "$SLOW0" ]; then
    check "on's report: CPU 3 left POLL alone" grep -q 'CPU 3 ≤ 0 µs by PM QoS: left POLL 0 µs; held off' "$OUT/cs.out"
    u0=$(entries 3 0); h0=$(entries 1 0); sleep 3; u1=$(entries 3 0); h1=$(entries 1 0)
    check "bounded at 0, CPU 3 entered no $SLOW0in 3 s ($u0 -> $u1)" [ "$u0" = "$u1" ]
    check "housekeeping CPU 1 still did ($h0 -> $h1)" [ "$h1" -gt "$h0" ]
    note "bound 0 on CPU 3 under $(cat /sys/devices/system/cpu/cpuidle/current_driver): its entries into $SLOW0stood at $u1 over 3 s; CPU 1's went $h0 -> $h1"
else
    info "no cpuidle driver in this guest: entries not counted"
fi
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "CPU 3's bound reads $Q3 again" [ "$(qos 3)" = "$Q3" ]
snap after2
snap_equal before after2 "a bound of 0, then off: the snapshot equals the one before on"
custom_state_end
result
