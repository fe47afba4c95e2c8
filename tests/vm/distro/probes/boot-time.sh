#!/bin/sh
# summary: where a guest's boot time goes under emulation (notes only):
#   systemd-analyze's totals, the slowest units and the critical chain to
#   the job; the test bed's CI time is mostly boots
. /job/lib.sh "$1"
note "kernel $(uname -r): $(systemd-analyze time 2>&1 | head -n1)"
systemd-analyze blame --no-pager 2>&1 | head -n 15 | sed 's/^/    blame| /'
systemd-analyze critical-chain --no-pager cpushield-job.service 2>&1 | head -n 25 | sed 's/^/    chain| /'
check "systemd-analyze answered" systemd-analyze time
result
