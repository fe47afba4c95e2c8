#!/bin/sh
# Inside the distribution guest: runs the job's scenarios in order
# (/job/order), each in its own shell, with the results protocol of the
# busybox test bed (CPUSHIELD-SCENARIO-START / CPUSHIELD-RESULT lines).
export PATH=/job:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
chmod 755 /job/cpushield
for s in $(cat /job/order); do
    mkdir -p "/results/$s"
    echo "CPUSHIELD-SCENARIO-START: $s at $(cut -d' ' -f1 /proc/uptime)s"
    timeout 600 sh "/job/scenarios/$s.sh" "$s" || echo "CPUSHIELD-RESULT: FAIL $s (the scenario script exited $?)"
    # a shield a failed scenario left behind must not spoil the next one
    /job/cpushield off >/dev/null 2>&1
done
