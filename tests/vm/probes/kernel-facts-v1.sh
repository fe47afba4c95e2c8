#!/bin/sh
# summary: the kernel-facts probe on a cgroup v1 cpuset hierarchy (6.1)
# vm: cpus=4 cgroup=v1
. /scenarios/kernel-facts.sh "$1"
