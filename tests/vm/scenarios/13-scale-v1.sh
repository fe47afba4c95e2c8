#!/bin/sh
# summary: 12-scale through the cgroup v1 cpuset (a process moves whole, one migration each): every idle thread leaves the shield and gets its CPUs back; notes the times
# vm: cpus=4 cgroup=v1 kernels=6.12
. /guest/lib.sh "$1"
[ "$(cgroup_mode)" = v1 ] || skip "no cgroup v1 cpuset on $KVER (kernel built without CONFIG_CPUSETS_V1)"
. /scenarios/12-scale.sh
