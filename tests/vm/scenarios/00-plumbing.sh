#!/bin/sh
# summary: the guest itself: modules, MSI IRQs, cgroup2 cpuset, tools, binary
# vm: cpus=4
. /guest/lib.sh "$1"

info "kernel $KVER, $NCPUS CPUs, cgroup $(cgroup_mode)"
check "4 CPUs online" [ "$(all_cpus)" = "0-$((NCPUS - 1))" ]
check "virtio-blk disk present" [ -b /dev/vda ]
check "virtio-net interface present" [ -e /sys/class/net/eth0 ]
check "PCI-MSI interrupts present" grep -q 'PCI-MSI' /proc/interrupts
dd if=/dev/vda of=/dev/null bs=64k count=64 2>/dev/null
grep -E 'virtio|MSI' /proc/interrupts | sed 's/^/  /'
check "cgroup2 mounted with the cpuset controller" grep -qw cpuset /sys/fs/cgroup/cgroup.controllers
check "cyclictest runs" cyclictest -q -t1 -l 100 -i 1000 -m
check "stress-ng runs" stress-ng --cpu 1 --timeout 1 -q
check "cpushield binary present" has_cpushield
cpushield --help >"$OUT/help" 2>&1; rc=$?
sed 's/^/  | /' "$OUT/help" | head -20
check "cpushield --help exits 0" [ $rc -eq 0 ]
sh /guest/snapshot.sh >"$OUT/s1"; sh /guest/snapshot.sh >"$OUT/s2"
info "snapshot: $(wc -l <"$OUT/s1") lines ($(grep -c '^task' "$OUT/s1") tasks, $(grep -c '^irq' "$OUT/s1") IRQs)"
check "two idle snapshots compare equal" sh /guest/compare.sh "$OUT/s1" "$OUT/s2"
sh /guest/compare.sh "$OUT/s1" "$OUT/s2" | sed 's/^/  /' | head
result
