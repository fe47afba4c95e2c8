#!/bin/sh
# summary: cgroup v1 cpuset hierarchy: on/children/off assertions through the v1 path
# vm: cpus=4 cgroup=v1
. /guest/lib.sh "$1"
SH=2-3
if [ "$(cgroup_mode)" != v1 ]; then
    grep -q CONFIG_CPUSETS_V1 /proc/config.gz 2>/dev/null
    note "cgroup v1 cpuset cannot be mounted on this kernel: $(mount -t cgroup -o cpuset x /mnt 2>&1 | head -c 100) (Debian 6.12 is built without CONFIG_CPUSETS_V1)"
    skip "no cgroup v1 cpuset on $KVER (kernel built without CONFIG_CPUSETS_V1)"
fi
has_cpushield || { bad "cpushield binary in the guest"; result; }
custom_state
snap before
REFUSING=$(refusing_irqs)
children_check $SH
cp "$OUT/cs.1.out" "$OUT/on.out"
assert_shield $SH "$OUT/on.out" "" "$REFUSING"
cs status --json; check "status --json exits 0" [ "$CS_RC" -eq 0 ]
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
snap after; snap_equal before after "v1: snapshot after off equals snapshot before on"
custom_state_end
result
