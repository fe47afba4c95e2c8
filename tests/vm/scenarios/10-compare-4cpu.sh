#!/bin/sh
# summary: compare on 4 vCPUs (CPUs 2-3 measured and shielded): report well-formed, 3 phases, restored, no strays
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
. /guest/compare-scenario.sh
check "the guest has 4 CPUs" [ "$NCPUS" -eq 4 ]
compare_scenario 2-3
