#!/bin/sh
# summary: on 3 after on 2-3 changes the shield; refused inputs (and a cache share without RDT) change nothing
# vm: cpus=4
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
custom_state
snap s0
refuse_all() { # refuse_all SNAPNAME WHEN
    local bad_in i=0
    for bad_in in 7 0-3 "" abc 3-2 -1 2-3,99; do
        i=$((i + 1))
        cs on "$bad_in"
        if [ "$CS_RC" -ne 0 ]; then ok "$2: on '$bad_in' is refused (exit $CS_RC)"; else bad "$2: on '$bad_in' is refused (exit 0)"; fi
        check "$2: on '$bad_in' gave a message" [ -s "$OUT/cs.stderr" ] || [ -s "$OUT/cs.stdout" ]
        snap "r$1.$i"; snap_equal "$1" "r$1.$i" "$2: on '$bad_in' changed nothing"
    done
}
refuse_all s0 "no shield"
# QEMU models no RDT: a cache share is refused, saying why, and the mount
# point resctrl would use stays as it was.
cs on 2-3 --cache-ways 2
check "on 2-3 --cache-ways 2 is refused where the CPU has no cat_l3 (exit $CS_RC)" [ "$CS_RC" -ne 0 ]
info "$(cat "$OUT/cs.stderr")"
check "its message names the missing CPU feature" grep -q "cat_l3" "$OUT/cs.stderr"
check "resctrl is not mounted" sh -c "! grep -q ' resctrl ' /proc/self/mounts"
snap rc0; snap_equal s0 rc0 "on --cache-ways changed nothing"
cs on 2-3; check "on 2-3 exits 0" [ "$CS_RC" -eq 0 ]
snap s1
refuse_all s1 "shield 2-3 active"
cs on 3; check "on 3 (change in place) exits 0" [ "$CS_RC" -eq 0 ]
assert_shield 3 "$OUT/cs.out" "" "$(refusing_irqs)"
got=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
check "after the change CPU 2 is housekeeping again: a new child gets 0-2 (got $got)" [ "$got" = 0-2 ]
cs on 0xc; check "on 0xc (hex mask, = 2-3) exits 0" [ "$CS_RC" -eq 0 ]
[ "$(cgroup_mode)" = v2 ] && check "on 0xc: partition holds 2-3" sh -c "cat /sys/fs/cgroup/*/cpuset.cpus.partition /sys/fs/cgroup/*/cpuset.cpus.effective 2>/dev/null | grep -qx 2-3"
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
snap s2; snap_equal s0 s2 "after change and off: snapshot equals the first"
custom_state_end
result
