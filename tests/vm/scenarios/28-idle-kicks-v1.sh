#!/bin/sh
# summary: issue 58 on cgroup v1 (an exclusive cpuset without load balancing): 27-idle-kicks's cases, and the shield cpuset still holds its CPUs after they went offline and back (v1 gives an offline CPU back to the root cpuset only)
# vm: cpus=4 cgroup=v1 kernels=6.1
. /guest/lib.sh "$1"
[ "$(cgroup_mode)" = v1 ] || skip "no cgroup v1 cpuset on $KVER (kernel built without CONFIG_CPUSETS_V1)"
. "$(dirname "$0")/27-idle-kicks.sh"
