#!/bin/sh
# summary: audit before/while on --tune (then --tune --hotplug-restart, then --tune=thp,khugepaged): tunable findings go to ok, knobs it cannot set are reported; the huge-page choice files read back with never chosen; off restores every knob (snapshot equal)
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ "$(cgroup_mode)" = v2 ] || skip "needs cgroup v2"

# The watchdog switches: read now, while they are on, and not again until
# 'off' has put them back (reading them while off was seen to break
# re-enabling: KERNEL-NOTES 20).  The snapshots include them only then.
WD0=$(cat /proc/sys/kernel/watchdog 2>/dev/null)
NMI0=$(cat /proc/sys/kernel/nmi_watchdog 2>/dev/null)
NMI_MODE=$(stat -c %a /proc/sys/kernel/nmi_watchdog 2>/dev/null)
info "before: watchdog=$WD0 nmi_watchdog=$NMI0 (mode $NMI_MODE)"
SNAP_WATCHDOG=1 snap before

# Every knob file 'tune --list' documents must be in the snapshot, so that
# 'snapshot equal' means 'every knob back to its value'.
CS_SHOW=3; cs tune --list --json; CS_SHOW=60
cp "$OUT/cs.stdout" "$OUT/cs.tune-list"
grep -oE '"(proc|sys)/[^"]*"' "$OUT/cs.stdout" | tr -d '"' >"$OUT/knob.paths"
: >"$OUT/knob.files"
while read -r p; do
    case $p in
        *"{cpu}"*) for c in 2 3; do echo "/$(echo "$p" | sed "s/{cpu}/$c/")"; done ;;
        *) echo "/$p" ;;
    esac
done <"$OUT/knob.paths" >>"$OUT/knob.files"
for f in /sys/class/net/*/queues/rx-*/rps_cpus /sys/class/net/*/queues/tx-*/xps_cpus; do
    [ -f "$f" ] && echo "$f"
done >>"$OUT/knob.files"
missing=""; present=0; : >"$OUT/knob.absent"
while read -r f; do
    # a file may exist and still not read (xps_cpus of a single-queue NIC: ENOENT)
    if ! cat "$f" >/dev/null 2>&1; then echo "$f" >>"$OUT/knob.absent"; continue; fi
    present=$((present + 1))
    grep -q "^file $f " "$OUT/snap.before" || grep -q "^file $f\$" "$OUT/snap.before" || missing="$missing $f"
done <"$OUT/knob.files"
info "knob files documented by tune --list: $(wc -l <"$OUT/knob.files"), readable here: $present, absent or unreadable: $(tr '\n' ' ' <"$OUT/knob.absent")"
check "every present knob file of tune --list is in the snapshot (missing:${missing:- none})" [ -z "$missing" -a "$present" -gt 5 ]

# findings FILE: "id severity next" per finding of an audit --json
findings() {
    awk '
    /^ *"id": /       { id = $0; sub(/^ *"id": "/, "", id); sub(/",?$/, "", id) }
    /^ *"severity": / { sev = $0; sub(/^ *"severity": "/, "", sev); sub(/",?$/, "", sev) }
    /^ *"next": null/ { print id, sev, ""; next }
    /^ *"next": /     { nx = $0; sub(/^ *"next": "/, "", nx); sub(/",?$/, "", nx); print id, sev, nx }
    ' "$1"
}
sev_of() { awk -v id="$1" '$1 == id { print $2; exit }' "$2"; }
irq_count() { # number of IRQs in the irq-affinity finding's reason
    awk '/"id": "irq-affinity"/ { f = 1 } f && /"reason": / { if (match($0, /[0-9]+ IRQs/)) print substr($0, RSTART, RLENGTH - 5); else print 0; exit }' "$1"
}

CS_SHOW=3; cs audit --cpus $SH --window 1 --json; CS_SHOW=60
check "audit --cpus $SH --json before on exits 0" [ "$CS_RC" -eq 0 ]
cp "$OUT/cs.stdout" "$OUT/audit.before"
findings "$OUT/audit.before" >"$OUT/f.before"
info "before: $(awk '{ printf "%s=%s ", $1, $2 }' "$OUT/f.before")"
# the findings a --tune knob clears, as audit itself says (its next step)
awk '$2 != "ok" && $3 == "cpushield" && $0 ~ /--tune=/ { print $1 }' "$OUT/f.before" >"$OUT/tunable.ids"
info "findings whose next step is a --tune knob: $(tr '\n' ' ' <"$OUT/tunable.ids")"
for id in rt-throttling vmstat watchdog; do
    check "before: $id is warn or bad ($(sev_of $id "$OUT/f.before"))" grep -qx "$id" "$OUT/tunable.ids"
done
for id in irq-default workqueue irq-affinity; do
    s=$(sev_of $id "$OUT/f.before")
    check "before: $id is warn or bad ($s)" [ -n "$s" -a "$s" != ok ]
done
IRQS_BEFORE=$(irq_count "$OUT/audit.before")
IRQS_LEFT=""

# after_on ROUND: the audit while the shield is on
after_on() {
    local round=$1 id s
    cs status
    check "$round: status says the shield holds, every knob file it set reading as set (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
    CS_SHOW=3; cs audit --window 1 --json; CS_SHOW=60
    check "$round: audit --json while on exits 0" [ "$CS_RC" -eq 0 ]
    cp "$OUT/cs.stdout" "$OUT/audit.$round"
    findings "$OUT/audit.$round" >"$OUT/f.$round"
    info "$round: $(awk '{ printf "%s=%s ", $1, $2 }' "$OUT/f.$round")"
    for id in $( (cat "$OUT/tunable.ids"; echo irq-default; echo workqueue) | sort -u); do
        s=$(sev_of "$id" "$OUT/f.$round")
        if [ "$id" = nmi-watchdog ] && [ "$s" != ok ]; then
            # not writable here: it must have been reported by 'on'
            check "$round: nmi-watchdog stays $s and 'on' reported it could not be set" grep -q nmi_watchdog "$OUT/on.$round"
            continue
        fi
        check "$round: $id $(sev_of "$id" "$OUT/f.before") -> ${s:-missing}" [ "$s" = ok ]
    done
    local n
    n=$(irq_count "$OUT/audit.$round")
    for id in irq-affinity irq-effective; do
        info "$round: $id: $(awk -v id="$id" '$0 ~ "\"id\": \"" id "\"" { f = 1 } f && /"reason": / { sub(/^ *"reason": /, ""); print; exit }' "$OUT/audit.$round")"
    done
    check "$round: IRQs whose affinity includes $SH: $IRQS_BEFORE before, ${n:-0} now (the refusing ones)" [ "${n:-0}" -lt "$IRQS_BEFORE" ]
    if [ -z "$IRQS_LEFT" ]; then
        IRQS_LEFT=${n:-0}
    else
        # CPU hotplug must not leave more IRQs on the shield than a plain on
        check "$round: no more IRQs on $SH than after plain on (${n:-0} <= $IRQS_LEFT)" [ "${n:-0}" -le "$IRQS_LEFT" ]
    fi
    check "$round: audit reads the watchdog from the journal, not the file" grep -q 'watchdog off (by the shield, from its journal)' "$OUT/audit.$round"
    check "$round: sched_rt_runtime_us reads -1" [ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = -1 ]
    check "$round: vm/stat_interval reads 1000" [ "$(cat /proc/sys/vm/stat_interval)" = 1000 ]
}

# after_off ROUND: every knob back (snapshot equal, watchdogs included)
after_off() {
    local round=$1
    cs off; check "$round: off exits 0" [ "$CS_RC" -eq 0 ]
    check "$round: watchdog reads $WD0 again after off" [ "$(cat /proc/sys/kernel/watchdog 2>/dev/null)" = "$WD0" ]
    SNAP_WATCHDOG=1 snap "after.$round"
    snap_equal before "after.$round" "$round: snapshot after off (every knob, watchdogs included) equals before"
}

# --- round 1: on --tune
cs on $SH --tune=all,rt-throttling,watchdog,nmi-watchdog,hung-task; check "tune: on $SH --tune=all,rt-throttling,watchdog,nmi-watchdog,hung-task exits 0" [ "$CS_RC" -eq 0 ]
cp "$OUT/cs.out" "$OUT/on.tune"
if [ -n "$NMI0" ] && [ "$NMI0" != 0 ]; then
    check "tune: nmi_watchdog ($NMI0, mode $NMI_MODE) that cannot be set is reported by on, not fatal" grep -q 'nmi_watchdog' "$OUT/on.tune"
    grep 'nmi_watchdog' "$OUT/on.tune" | head -n2 | while read -r l; do note "on --tune with nmi_watchdog=$NMI0 (mode $NMI_MODE): $l"; done
fi
grep -E '^ *(note|tune|other changes refused)|tune [a-z-]+:' "$OUT/on.tune" | head -n 12 | sed 's/^/  on --tune said: /'
# knobs that cannot be set here are reported, not fatal; those only
# applied by name and not named here (turbo, huge pages, overcommit) are
# not its to report
awk '{ while (match($0, /"(proc|sys)\/[^"]*"/)) { buf = buf " /" substr($0, RSTART + 1, RLENGTH - 2); $0 = substr($0, RSTART + RLENGTH) } }
     /"in_all": false/ { print buf } /"in_all":/ { buf = "" }' "$OUT/cs.tune-list" | tr ' ' '\n' | grep . >"$OUT/knob.byname" || true
unreported=""
while read -r f; do
    grep -qxF "$f" "$OUT/knob.byname" && continue
    grep -qF "$f" "$OUT/on.tune" || unreported="$unreported $f"
done <"$OUT/knob.absent"
check "tune: every knob file of the knobs named absent or unreadable here is reported by on (unreported:${unreported:- none}; by name only: $(tr '\n' ' ' <"$OUT/knob.byname"))" [ -z "$unreported" ]
after_on tune
# A knob set back behind the shield (as a sysctl reload would): status
# names it (exit 3); the same on again sets it in place.
SI=/proc/sys/vm/stat_interval
if [ -w $SI ] && [ "$(cat $SI)" != 1 ]; then
    echo 1 >$SI
    cs status
    check "tune: vm.stat_interval set back to 1: status exits 3" [ "$CS_RC" -eq 3 ]
    check "tune: status names the knob and what it reads" grep -q "broken: tune vmstat: $SI reads 1" "$OUT/cs.out"
    cs on $SH --tune=all,rt-throttling,watchdog,nmi-watchdog,hung-task; check "tune: on $SH --tune=all,rt-throttling,watchdog,nmi-watchdog,hung-task again exits 0" [ "$CS_RC" -eq 0 ]
    check "tune: vm.stat_interval set again ($(cat $SI))" [ "$(cat $SI)" != 1 ]
    cs status; check "tune: status holds again (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
fi
after_off tune

# --- round 2: on --tune --hotplug-restart
t0=$(cut -d' ' -f1 /proc/uptime)
cs on $SH --tune=all,rt-throttling,watchdog,nmi-watchdog,hung-task --hotplug-restart
t1=$(cut -d' ' -f1 /proc/uptime)
cp "$OUT/cs.out" "$OUT/on.hotplug"
check "hotplug: on $SH --tune --hotplug-restart exits 0" [ "$CS_RC" -eq 0 ]
note "on $SH --tune --hotplug-restart took $t0 -> $t1 s (TCG)"
check "hotplug: on reports the CPUs went offline and online" grep -q 'offline and online' "$OUT/on.hotplug"
grep -F 'came back onto the shield' "$OUT/on.hotplug" | while read -r l; do note "on --hotplug-restart: $l"; done
check "hotplug: every CPU online afterwards ($(all_cpus))" [ "$(all_cpus)" = "0-$((NCPUS - 1))" ]
p=$(v2_partitions | head -n1)
info "partition: $p; root effective $(cat /sys/fs/cgroup/cpuset.cpus.effective); isolated '$(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)'"
case "$p" in
    *" isolated") ok "hotplug: partition ${p%% *} reads back 'isolated' after the CPUs came back" ;;
    *) bad "hotplug: partition reads back valid ('$p')" ;;
esac
check "hotplug: partition effective CPUs are $SH" cpus_equal "$(echo "$p" | awk '{ print $2 }')" $SH
a=$(cat /sys/fs/cgroup/cpuset.cpus.effective)
if cpus_overlap "$a" $SH; then bad "hotplug: root effective $a overlaps $SH"; else ok "hotplug: root effective $a is off $SH"; fi
after_on hotplug
after_off hotplug

# --- round 3: the huge-page knobs, by name (sysfs choice files: the word
# written, which the kernel then shows in brackets; off writes back the
# word that was chosen)
THP=/sys/kernel/mm/transparent_hugepage
if [ -w $THP/enabled ]; then
    info "before: enabled '$(cat $THP/enabled)', defrag '$(cat $THP/defrag)', khugepaged/defrag $(cat $THP/khugepaged/defrag)"
    cs on $SH --tune=thp,khugepaged; check "thp: on $SH --tune=thp,khugepaged exits 0" [ "$CS_RC" -eq 0 ]
    check "thp: the kernel shows never chosen ($(cat $THP/enabled))" grep -q '\[never\]' $THP/enabled
    check "thp: defrag never chosen too ($(cat $THP/defrag))" grep -q '\[never\]' $THP/defrag
    check "thp: khugepaged/defrag reads 0" [ "$(cat $THP/khugepaged/defrag)" = 0 ]
    cs status; check "thp: status says the shield holds, the choice files reading as set (exit $CS_RC)" [ "$CS_RC" -eq 0 ]
    after_off thp
else
    info "no writable $THP/enabled in this kernel: the huge-page round is not run"
fi
result
