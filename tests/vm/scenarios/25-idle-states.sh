#!/bin/sh
# summary: on --max-idle-latency bounds the shielded CPUs' PM QoS resume latency on a real kernel (the housekeeping CPUs keep theirs), the kernel reads the bound back, status names a CPU someone freed and on repairs it, a bound of 0 is written as n/a (polling only) and comes back as 0; where the kernel exposes cpuidle states, the held-off states are not entered while the bound holds; off gives back exactly the snapshot before on
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
QOS=/sys/devices/system/cpu/cpu%s/power/pm_qos_resume_latency_us
qos() { cat "$(printf $QOS "$1")" 2>/dev/null; }
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
SLOW=""
for st in /sys/devices/system/cpu/cpu3/cpuidle/state*; do
    [ -d "$st" ] || continue
    [ "$(cat "$st/latency")" -gt 10 ] && SLOW="$SLOW $st"
done
if [ -n "$SLOW" ]; then
    u0=$(for st in $SLOW; do cat "$st/usage"; done | tr '\n' ' ')
    sleep 3
    u1=$(for st in $SLOW; do cat "$st/usage"; done | tr '\n' ' ')
    check "CPU 3 entered no state over 10 µs in 3 s idle (usage $u0-> $u1)" [ "$u0" = "$u1" ]
else
    info "no cpuidle state over 10 µs on CPU 3 in this guest: entry counts not checked"
fi
# Someone lifts CPU 3's bound: status says so, on repairs it in place.
echo 0 >"$(printf $QOS 3)"
cs status; check "status with CPU 3's bound lifted: exit 3" [ "$CS_RC" -eq 3 ]
check "status names CPU 3 (idle-states)" grep -q 'CPU 3 may enter' "$OUT/cs.out"
cs on $SH --max-idle-latency 10us; check "on again repairs it (exit 0)" [ "$CS_RC" -eq 0 ]
check "CPU 3's bound is 10 again" [ "$(qos 3)" = 10 ]
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "CPU 3's bound is back ($Q3)" [ "$(qos 3)" = "$Q3" ]
snap after1
snap_equal before after1 "on --max-idle-latency 10us, lifted, repaired, off: the snapshot equals the one before on"

# 2. A bound of 0: polling only, written as n/a (0 means no bound).
cs on 3 --max-idle-latency 0; check "on 3 --max-idle-latency 0 exits 0" [ "$CS_RC" -eq 0 ]
check "the kernel reads CPU 3's bound as n/a" [ "$(qos 3)" = n/a ]
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "CPU 3's bound reads $Q3 again" [ "$(qos 3)" = "$Q3" ]
snap after2
snap_equal before after2 "a bound of 0, then off: the snapshot equals the one before on"
custom_state_end
result
