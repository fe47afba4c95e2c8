#!/bin/sh
# summary: on --balance within (tuned's no_balance_cores) makes the shield a partition the kernel load-balances inside: two busy loops started on CPU 2 and allowed on 2-3 are spread over 2 and 3 by the kernel, where with --balance off (isolated) both stay on CPU 2; a change in place between the two, status exit 0 each time, off restores the snapshot
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ "$(cgroup_mode)" = v2 ] || skip "needs cgroup v2 (v1's sched_load_balance is held by the fixture tests)"
snap s0
partition() { cat /sys/fs/cgroup/cpushield*/cpuset.cpus.partition 2>/dev/null | head -n1; }
last_cpu() { awk '{ print $39 }' "/proc/$1/stat" 2>/dev/null; }
LOOPS=""
# two_loops: two busy loops through run, pinned to CPU 2, then allowed on
# the whole shield; WHERE: where each last ran after 3 s
two_loops() {
    local pid
    LOOPS=""
    for _ in 1 2; do
        cpushield run --cpu 2 -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
        LOOPS="$LOOPS $!"
    done
    sleep 1
    for pid in $LOOPS; do taskset -p -c $SH "$pid" >/dev/null 2>&1; done
    sleep 3
    WHERE=$(for pid in $LOOPS; do last_cpu "$pid"; done | sort | tr '\n' ' ')
}
end_loops() { for pid in $LOOPS; do kill "$pid" 2>/dev/null; done; wait 2>/dev/null; LOOPS=""; }

cs on $SH --balance within; check "on $SH --balance within exits 0" [ "$CS_RC" -eq 0 ]
check "the partition reads root (load-balanced inside), not isolated ($(partition))" [ "$(partition)" = root ]
cs status; check "status holds (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
two_loops; where=$WHERE
info "balance within: the two loops last ran on CPUs $where"
check "balance within: the kernel spread the two loops over 2 and 3 ($where)" [ "$where" = "2 3 " ]
end_loops

cs on $SH --balance off; check "on $SH --balance off (in place) exits 0" [ "$CS_RC" -eq 0 ]
check "the partition reads isolated ($(partition))" [ "$(partition)" = isolated ]
cs status; check "status holds (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
two_loops; where=$WHERE
info "balance off: the two loops last ran on CPUs $where"
check "balance off: no balancing, both loops stay on CPU 2 ($where)" [ "$where" = "2 2 " ]
end_loops
note "--balance within: two loops allowed on $SH ran on CPUs spread by the kernel; --balance off: both stayed on CPU 2"

cs on $SH --balance within; check "back to --balance within in place exits 0" [ "$CS_RC" -eq 0 ]
check "the partition reads root again ($(partition))" [ "$(partition)" = root ]
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
snap s1; snap_equal s0 s1 "off: the snapshot equals the one before on"
result
