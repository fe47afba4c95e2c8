#!/bin/sh
# summary: booted with no cgroup mounted: on mounts cgroup2 (journaled), the partition is valid; off unmounts it; snapshot equal
# vm: cpus=4 cgroup=none
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
cg_mounts() { awk '$3 == "cgroup2" || $3 == "cgroup" { print $2 " " $3 }' /proc/self/mounts; }
check "no cgroup file system is mounted at boot ($(cg_mounts | tr '\n' ';'))" [ -z "$(cg_mounts)" ]
snap before

cs on $SH --dry-run; check "on --dry-run exits 0" [ "$CS_RC" -eq 0 ]
check "the dry run says it will mount cgroup2" grep -q "mount -t cgroup2" "$OUT/cs.out"
check "the dry run mounted nothing" [ -z "$(cg_mounts)" ]

cs on $SH; check "on $SH exits 0" [ "$CS_RC" -eq 0 ]
info "mounts now: $(cg_mounts | tr '\n' ';')"
MNT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
check "on mounted cgroup2 (at '$MNT')" [ -n "$MNT" ]
check "the mount is recorded in the journal" sh -c "grep -rqi 'mount' /run/cpushield/journal"
PART=$(cat "$MNT/cpushield/cpuset.cpus.partition" 2>/dev/null)
check "the partition reads back isolated ('$PART')" [ "$PART" = isolated ]
check "the partition's effective CPUs are $SH" cpus_equal "$(cat "$MNT/cpushield/cpuset.cpus.effective" 2>/dev/null)" $SH
cs status --json; check "status --json exits 0" [ "$CS_RC" -eq 0 ]

cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
check "off unmounted cgroup2 ($(cg_mounts | tr '\n' ';'))" [ -z "$(cg_mounts)" ]
snap after; snap_equal before after "snapshot after off equals snapshot before on"

# Something else mounted below ours: off must leave the mount and say so.
cs on $SH; check "on $SH again exits 0" [ "$CS_RC" -eq 0 ]
MNT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
mkdir "$MNT/someone-else" && mount -t tmpfs below "$MNT/someone-else"
BELOW=$(awk '$1 == "below" { print $2; exit }' /proc/self/mounts)
info "mounted a tmpfs at '$BELOW' below the cgroup2 mount"
cs off
check "off with a mount below ours does not unmount cgroup2 and exits non-zero (exit $CS_RC)" \
    sh -c "[ $CS_RC -ne 0 ] && awk '\$3 == \"cgroup2\"' /proc/self/mounts | grep -q ."
check "off names the mount it left" grep -qi "mount" "$OUT/cs.out"
umount "$BELOW"; rmdir "$MNT/someone-else"
cs off; check "off again, once the other mount is gone, exits 0" [ "$CS_RC" -eq 0 ]
check "cgroup2 is unmounted at the end ($(cg_mounts | tr '\n' ';'))" [ -z "$(cg_mounts)" ]
snap final; snap_equal before final "snapshot at the end equals snapshot before on"
result
