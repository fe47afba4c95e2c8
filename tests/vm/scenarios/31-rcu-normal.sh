#!/bin/sh
# summary: on --rcu-normal (6.1 and 6.12: on 7.x taking the loopback link down makes no expedited grace period, 0 IPIs with rcu_normal 0, so the churn proves nothing there): expedited RCU grace periods stop interrupting a shielded CPU that runs a task. A busy loop on shielded CPU 3 (its tick on: no nohz_full), the loopback link taken down and up N times from a housekeeping CPU (each a synchronize_net() under RTNL, an expedited grace period): function-call IPIs (CAL) on CPU 3 counted with the shield alone, then with --rcu-normal (the kernel reads rcu_normal 1 back); status names it written back; off gives back exactly the snapshot before on
# vm: cpus=4 kernels=6.1,6.12
. /guest/lib.sh "$1"
N=${RCU_TOGGLES:-100}
F=/sys/kernel/rcu_normal
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ -w $F ] || skip "this kernel has no writable $F"
command -v ip >/dev/null 2>&1 || skip "no ip command in the guest"
# cal CPU: function-call interrupts of CPU so far
cal() { awk -v c=$(($1 + 2)) '$1 == "CAL:" { print $c + 0 }' /proc/interrupts; }
# churn: N times the loopback down and up, from CPU 0; prints CPU 3's CAL
# over it
churn() {
    a=$(cal 3)
    taskset -c 0 sh -c "i=0; while [ \$i -lt $N ]; do ip link set lo down; ip link set lo up; i=\$((i + 1)); done"
    b=$(cal 3)
    echo $((b - a))
}
R0=$(cat $F)
info "rcu_normal reads $R0 before on; rcu_expedited $(cat /sys/kernel/rcu_expedited 2>/dev/null)"
snap before

cs on 3; check "on 3 exits 0" [ "$CS_RC" -eq 0 ]
cpushield run --cpu 3 -- sh -c 'while :; do :; done' >/dev/null 2>&1 & LOOP=$!
sleep 1
IDLE=$(churn)
info "CPU 3 busy, rcu_normal $R0: $IDLE function-call IPIs over $N downs and ups of lo"
cs on 3 --rcu-normal; check "on 3 --rcu-normal (in place) exits 0" [ "$CS_RC" -eq 0 ]
check "the kernel reads rcu_normal 1 back" [ "$(cat $F)" = 1 ]
check "on's report lists it among the machine-wide changes" grep -q "rcu_normal 1" "$OUT/cs.out"
NORMAL=$(churn)
info "CPU 3 busy, rcu_normal 1: $NORMAL function-call IPIs over $N downs and ups of lo"
note "expedited RCU: a busy shielded CPU took $IDLE function-call IPIs over $N loopback downs and ups with rcu_normal $R0, $NORMAL with --rcu-normal"
check "with rcu_normal $R0 the churn interrupts CPU 3 (at least $((N / 2)) IPIs: $IDLE)" [ "$IDLE" -ge $((N / 2)) ]
check "with --rcu-normal at most a tenth of that ($NORMAL of $IDLE)" [ $((NORMAL * 10)) -le "$IDLE" ]
cs status; check "status holds (exit 0)" [ "$CS_RC" -eq 0 ]
echo 0 >$F
cs status; check "status with rcu_normal written back to 0: exit 3" [ "$CS_RC" -eq 3 ]
check "status names it" grep -q "rcu_normal reads 0" "$OUT/cs.out"
kill "$LOOP" 2>/dev/null; wait "$LOOP" 2>/dev/null
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "rcu_normal reads $R0 again" [ "$(cat $F)" = "$R0" ]
snap after
snap_equal before after "on, on --rcu-normal in place, written back, off: the snapshot equals the one before on"
result
