#!/bin/sh
# summary: 14-kept through the cgroup v1 cpuset (single threads are kept)
# vm: cpus=4 cgroup=v1
. /guest/lib.sh "$1"
if [ "$(cgroup_mode)" != v1 ]; then
    skip "no cgroup v1 cpuset on $KVER (kernel built without CONFIG_CPUSETS_V1)"
fi
. /scenarios/14-kept.sh "$1"
