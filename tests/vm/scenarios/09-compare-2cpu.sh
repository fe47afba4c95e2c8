#!/bin/sh
# summary: compare on 2 vCPUs (CPU 1 measured and shielded): report well-formed, 3 phases, restored, no strays
# vm: cpus=2 kernels=6.12
. /guest/lib.sh "$1"
. /guest/compare-scenario.sh
check "the guest has 2 CPUs" [ "$NCPUS" -eq 2 ]
compare_scenario 1
