#!/bin/sh
# Inside the distribution guest: runs the job's scenarios in order
# (/job/order), each in its own shell, with the results protocol of the
# busybox test bed (CPUSHIELD-SCENARIO-START / CPUSHIELD-RESULT lines).
# A scenario may reboot the guest (guest/lib.sh reboot_and_resume): the
# next boot of the same disk runs this again, which goes on from that
# scenario (as many times as it asks). Any other reboot ends the job.
export PATH=/job:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
chmod 755 /job/cpushield
# settings from run.sh --set (SCENARIO_TIMEOUT: seconds per scenario)
[ -f /job/env ] && . /job/env
T=/var/lib/cpushield-test
resume=""
if [ -f $T/resume ]; then
    resume=$(cat $T/resume); rm -f $T/resume
    echo "CPUSHIELD-REBOOTED: boot after a reboot, going on with $resume (phase $(cat "$T/$resume.phase" 2>/dev/null))"
elif [ -f $T/started ]; then
    echo "CPUSHIELD-NOTE: the guest rebooted without a scenario asking for it; job ended"
    exit 0
fi
mkdir -p $T; touch $T/started
for s in $(cat /job/order); do
    if [ -n "$resume" ]; then
        [ "$s" = "$resume" ] || continue
        resume=""
    else
        mkdir -p "/results/$s"
        echo "CPUSHIELD-SCENARIO-START: $s at $(cut -d' ' -f1 /proc/uptime)s"
    fi
    # its limit: --set SCENARIO_TIMEOUT, else 900 s or its header's
    # time= where that is longer (the soak's)
    lim=${SCENARIO_TIMEOUT:-900}
    t=$(sed -n 's/^# distro: //p' "/job/scenarios/$s.sh" | tr ' ' '\n' | sed -n 's/^time=//p' | head -n1)
    [ -z "${SCENARIO_TIMEOUT:-}" ] && [ "${t:-0}" -gt "$lim" ] && lim=$t
    timeout "$lim" sh "/job/scenarios/$s.sh" "$s" || echo "CPUSHIELD-RESULT: FAIL $s (the scenario script exited $?)"
    # a shield a failed scenario left behind must not spoil the next one
    /job/cpushield off >/dev/null 2>&1
done
