# Helpers for the distribution scenarios (sourced): checks, the results
# protocol, and what a shield must hold, measured with the guest's own
# tools rather than with cpushield's reports.
S=$1
OUT=/results/$S
# The phase of a scenario that reboots: 1 in the first boot, 2 after its
# first reboot, 3 after its second, and so on.
PHASE=$(cat "/var/lib/cpushield-test/$S.phase" 2>/dev/null || echo 1)
mkdir -p "$OUT"
FAILS=0
T0=$(cut -d. -f1 /proc/uptime)
el() { echo "$(( $(cut -d. -f1 /proc/uptime) - T0 ))s"; }
info() { echo "  [$(el)] $*"; }
note() { echo "CPUSHIELD-NOTE: $*"; }
check() { # check DESCRIPTION COMMAND...
    d=$1; shift
    if "$@"; then echo "  ok   $d [$(el)]"; else echo "  FAIL $d [$(el)]"; FAILS=$((FAILS + 1)); fi
}
result() {
    if [ "$FAILS" = 0 ]; then echo "CPUSHIELD-RESULT: PASS $S"; else echo "CPUSHIELD-RESULT: FAIL $S ($FAILS checks failed)"; fi
    exit 0
}
cs() { # cs ARGS: runs cpushield; output in $OUT/cs.out, exit code in CS_RC
    info "cpushield $*"
    /job/cpushield "$@" >"$OUT/cs.out" 2>&1; CS_RC=$?
    sed 's/^/    | /' "$OUT/cs.out"
}
# in_set CPU LIST: whether CPU is in the cpulist LIST (e.g. 0-1,3)
in_set() {
    echo "$2" | tr ',' '\n' | while IFS=- read -r a b; do
        [ -z "$b" ] && b=$a
        [ "$1" -ge "$a" ] && [ "$1" -le "$b" ] && echo y && break
    done | grep -q y
}
# meets LIST SHIELD: whether two cpulists share a CPU
meets() {
    for c in $(expand "$1"); do in_set "$c" "$2" && return 0; done
    return 1
}
expand() { echo "$1" | tr ',' '\n' | while IFS=- read -r a b; do seq "$a" "${b:-$a}"; done; }
# cpus_of PID: the CPUs the kernel allows the process
cpus_of() { awk '/^Cpus_allowed_list/ {print $2}' /proc/$1/status; }
# set_sleepers: of a shield with sets app1 (CPU 1) and app2 (CPU 3), a
# sleeper started in each by `run`: by --set app1 (p1), by --cpu 3 (p2)
set_sleepers() {
    /job/cpushield run --set app1 -- sleep 300 >"$OUT/run1" 2>&1 &
    /job/cpushield run --cpu 3 -- sleep 301 >"$OUT/run2" 2>&1 &
    sleep 2
    p1=$(pgrep -x -f 'sleep 300'); p2=$(pgrep -x -f 'sleep 301')
}
# Threads outside the shield cgroup allowed on SHIELD, except per-CPU
# kernel threads (kthreads allowed on one CPU only, or that no one may move:
# PF_NO_SETAFFINITY) and irq/N threads (they follow their IRQ, checked
# apart): "tid name cpus cgroup" lines. One awk reads each thread's files
# once (threads exit meanwhile).
thread_leaks() {
    for t in /proc/[0-9]*/task/[0-9]*; do echo "$t"; done >/tmp/.leaks.$$
    awk -v sh="$1" '
    function expand(l, set,   n, a, i, r, lo, hi, c) {
        n = split(l, a, ","); for (i = 1; i <= n; i++) { r = split(a[i], lo, "-"); hi = (r == 2) ? lo[2] : lo[1]; for (c = lo[1] + 0; c <= hi + 0; c++) set[c] = 1 }
    }
    BEGIN { expand(sh, S) }
    {
        t = $0; f = t "/status"; name = ppid = cpus = ""
        while ((getline line < f) > 0) {
            if (line ~ /^Name:/) { name = line; sub(/^Name:[ \t]*/, "", name) }
            else if (line ~ /^PPid:/) { split(line, a, /[ \t]+/); ppid = a[2] }
            else if (line ~ /^Cpus_allowed_list:/) { split(line, a, /[ \t]+/); cpus = a[2] }
        }
        close(f)
        if (cpus == "") next
        delete C; expand(cpus, C); on = 0; n = 0
        for (c in C) { n++; if (c in S) on = 1 }
        if (!on) next
        f = t "/cgroup"; cg = ""
        while ((getline line < f) > 0) if (line ~ /^0::/ || line ~ /:cpuset:/) cg = line
        close(f)
        if (cg ~ /:\/cpushield/) next
        f = t "/stat"; fl = 0
        if ((getline line < f) > 0) { rest = substr(line, match(line, /\) /) + 2); split(rest, a, " "); fl = a[7] + 0 }
        close(f)
        kthread = (ppid == 2 || ppid == 0)
        if (kthread && n == 1) next
        if (int(fl / 67108864) % 2) next
        if (name ~ /^irq\//) next
        split(t, p, "/"); print p[5], name, cpus, cg
    }' /tmp/.leaks.$$
    rm -f /tmp/.leaks.$$
}
# IRQs whose smp_affinity_list meets SHIELD: "irq list" lines
irq_on() {
    for f in /proc/irq/[0-9]*/smp_affinity_list; do
        l=$(cat "$f"); meets "$l" "$1" && { n=${f#/proc/irq/}; echo "${n%%/*} $l"; }
    done
}
# The state a shield must give back: every thread's CPUs and cgroup, IRQs,
# cpuset and control files of every cgroup (the busybox test bed's
# snapshot), plus what systemd and irqbalance hold: unit properties, the
# irqbalance environment, runtime files. Units the scenarios start and stop
# themselves (cs-*, run-u*) are left out.
# status_holds_after T0: runs status every 0.1 s (for up to 6 s) until it
# exits 0; sets HELD_RC (its last exit) and HELD_AFTER (seconds from T0, a
# /proc/uptime reading, to the end of the status that held: status waits
# for a repair being made); each status that did not hold says why, once,
# in the scenario's output.
status_holds_after() {
    i=0; HELD_RC=3; t1=$1
    while [ $i -lt 60 ]; do
        /job/cpushield status >"$OUT/held.out" 2>&1; HELD_RC=$?
        t1=$(cut -d' ' -f1 /proc/uptime)
        [ $HELD_RC = 0 ] && break
        info "status at +$(awk "BEGIN { printf \"%.1f\", $t1 - $1 }") s: exit $HELD_RC: $(grep -iE -m2 'broken|drift' "$OUT/held.out" | tr -s ' ' | tr '\n' ' ')"
        sleep 0.1; i=$((i + 1))
    done
    HELD_AFTER=$(awk "BEGIN { printf \"%.1f\", $t1 - $1 }")
}
# heal_counted REASON: waits up to 5 s for the healer's state file to count
# a repair for REASON, 0 when it does. The healer writes its count after
# the repair has let go of the lock, so a status that holds can come first.
heal_counted() {
    i=0
    while [ $i -lt 50 ]; do
        grep -Eq "\"$1\": *[1-9]" /run/cpushield/heal.json && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
snap() { # snap NAME
    f=$OUT/snap.$1
    {
        sh /job/snapshot.sh | grep -v '/cs-\|/run-u[0-9]'
        for u in -.slice init.scope system.slice user.slice; do
            echo "unit $u $(systemctl show -p AllowedCPUs -p EffectiveCPUs -- "$u" | tr '\n' ' ')"
        done
        echo "irqbalance $(systemctl is-active irqbalance) env=$(tr '\0' '\n' </proc/"$(systemctl show -p MainPID --value irqbalance)"/environ 2>/dev/null | grep BANNED | tr '\n' ' ')"
        echo "manager environment: $(systemctl show-environment | grep '^IRQBALANCE' | tr '\n' ' ')"
        find /run/systemd/system /run/systemd/system.control /run/systemd/transient -mindepth 1 2>/dev/null | grep -v '/cs-\|/run-u[0-9]' | sort | sed 's/^/runfile /'
    } >"$f"
}
# snap_equal A B DESCRIPTION: checks two snapshots match (shows the difference)
snap_equal() {
    if sh /job/compare.sh "$OUT/snap.$1" "$OUT/snap.$2" >"$OUT/diff.$1.$2"; then
        check "$3" true
    else
        sed 's/^/    /' "$OUT/diff.$1.$2" | head -n 40
        check "$3" false
    fi
}
# snap_equal_after_irqbalance A B DESCRIPTION [kubelet]: as snap_equal, across a
# stretch where irqbalance ran: it places every IRQ it balances again at
# each start, by the interrupt counts so far (off restarts it without the
# ban, SYSTEMD-NOTES 9), and every 10 s it may move an IRQ whose CPU got
# busy (dpkg's own work is enough: CI saw 3 IRQs move during a purge).
# It places an IRQ on one CPU, or on a whole cache domain or package
# (CI saw irq 40 go from 1 to 0-3 on a 4-CPU guest, all the CPUs online):
# IRQs moved between such places are its doing and are listed apart;
# every other difference fails.
snap_equal_after_irqbalance() {
    sh /job/compare.sh "$OUT/snap.$1" "$OUT/snap.$2" >"$OUT/diff.$1.$2"
    awk -v all="$(cat /sys/devices/system/cpu/online)" '
        function placed(s) { return s ~ /^[0-9]+$/ || s == all }
        /^changed: +irq [0-9]+ \(\): [0-9,-]+ -> [0-9,-]+$/ && placed($5) && placed($7) { print > "/dev/stderr"; next }
        !/^\(tasks compared/ { print }' \
        "$OUT/diff.$1.$2" 2>"$OUT/diff.irqbalance" >"$OUT/diff.rest"
    [ -s "$OUT/diff.irqbalance" ] && info "IRQs irqbalance placed anew in between: $(awk '{print $3 ": " $5 " -> " $7}' "$OUT/diff.irqbalance" | tr '\n' ' ')"
    # Services other than cpushield's that started or stopped by
    # themselves in between take their cgroups with them (CI saw polkit,
    # which exits when idle, and tuned go on Debian 13): listed apart.
    grep -E '^only (before|after): (file|cgdir) /sys/fs/cgroup/system\.slice/[^/]+\.service' "$OUT/diff.rest" \
        | grep -v cpushield >"$OUT/diff.units" || true
    if [ -s "$OUT/diff.units" ]; then
        info "services that came or went by themselves in between: $(sed -n 's|.*/system\.slice/\([^/ ]*\.service\).*|\1|p' "$OUT/diff.units" | sort -u | tr '\n' ' ')"
        grep -v -F -x -f "$OUT/diff.units" "$OUT/diff.rest" >"$OUT/diff.rest.left" || true
        mv "$OUT/diff.rest.left" "$OUT/diff.rest"
    fi
    # With a 4th argument "kubelet", on a Kubernetes node: kubelet's own
    # doing is counted apart: threads that came and went (kubelet's and
    # containerd's), its pods' cgroups and their units' runtime files
    # (pods made and deleted), and a unit's cpuset.cpus given every
    # possible CPU where it had none (the kernel refuses an empty one to a
    # cgroup with tasks, ENOSPC: the same effective CPUs, docs/kubernetes.md).
    if [ "${4:-}" = kubelet ]; then
        all=$(cat /sys/devices/system/cpu/possible)
        grep -v -e '^only \(before\|after\): *task' \
            -e '^only \(before\|after\): *\(file\|cgdir\) /sys/fs/cgroup/kubepods\.slice/' \
            -e '^only \(before\|after\): *\(file\|cgdir\) /sys/fs/cgroup/system\.slice/crio-conmon-' \
            -e '^only \(before\|after\): *runfile /run/systemd/transient/\(kubepods-\|cri-containerd-\|crio-\)' \
            -e "^changed: *file /sys/fs/cgroup/[a-z.]*/cpuset\.cpus (): *-> $all\$" \
            "$OUT/diff.rest" >"$OUT/diff.rest.left" || true
        info "kubelet's own in between (threads, pods, units' cpuset.cpus ENOSPC): $(( $(wc -l <"$OUT/diff.rest") - $(wc -l <"$OUT/diff.rest.left") )) lines"
        mv "$OUT/diff.rest.left" "$OUT/diff.rest"
    fi
    sed 's/^/    /' "$OUT/diff.rest" | head -n 40
    check "$3" [ ! -s "$OUT/diff.rest" ]
}
# irqbalance_pid: irqbalance's process id and start time ("PID:START"),
# read from /proc; empty when it does not run
irqbalance_pid() {
    pid=$(systemctl show -p MainPID --value irqbalance 2>/dev/null)
    [ -n "$pid" ] && [ "$pid" != 0 ] || return 0
    echo "$pid:$(awk '{print $22}' /proc/$pid/stat 2>/dev/null)"
}
# irqbalance_said_true OUTPUT BEFORE AFTER: on's irqbalance line (in OUTPUT)
# says "restarted" only when irqbalance's process (BEFORE, AFTER: as
# irqbalance_pid prints them) changed, and then names both pids
irqbalance_said_true() {
    line=$(grep '^ *irqbalance ' "$1")
    info "irqbalance $2 before on, $3 after; on said: $line"
    if [ -z "$2" ] || [ -z "$3" ]; then
        check "on does not say irqbalance restarted when it did not run" sh -c "! grep -q 'irqbalance restarted' '$1'"
    elif [ "$2" = "$3" ]; then
        check "irqbalance kept its process (pid ${2%%:*}): on says so and not 'restarted'" \
            sh -c "grep -q 'kept running as pid ${2%%:*}' '$1' && ! grep -q restarted '$1'"
    else
        check "irqbalance's process changed (${2%%:*} -> ${3%%:*}): on says restarted" \
            grep -q "irqbalance restarted: pid ${2%%:*} -> ${3%%:*}" "$1"
    fi
}
# remove_irqbalance_ban: takes cpushield's irqbalance ban away wherever it
# is (systemd's manager environment, or the runtime drop-in) and restarts
# irqbalance without it
remove_irqbalance_ban() {
    systemctl unset-environment IRQBALANCE_BANNED_CPULIST
    rm -f /run/systemd/system/irqbalance.service.d/50-cpushield.conf
    systemctl daemon-reload; systemctl restart irqbalance; sleep 2
}
# irqbalance_settle: waits until irqbalance (when it runs) has had one 10 s
# rebalancing cycle, plus 2 s, since the later of its start and cpushield's
# last change of /run/cpushield (on and off tell a running irqbalance its
# ban through its socket, and it rebuilds and places its IRQs anew only at
# its next cycle)
irqbalance_settle() {
    pid=$(systemctl show -p MainPID --value irqbalance 2>/dev/null)
    [ -n "$pid" ] && [ "$pid" != 0 ] || return 0
    hz=$(getconf CLK_TCK); start=$(awk '{print $22}' /proc/$pid/stat 2>/dev/null) || return 0
    since=$((start / hz))
    boot=$(( $(date +%s) - $(cut -d. -f1 /proc/uptime) ))
    for d in /run/cpushield /run/cpushield/journal; do
        [ -d "$d" ] || continue
        t=$(( $(stat -c %Y "$d") - boot ))
        [ "$t" -gt "$since" ] && since=$t
    done
    up=$(( $(cut -d. -f1 /proc/uptime) - since ))
    [ "$up" -lt 12 ] && sleep $((12 - up))
    return 0
}
# refused_cpu CPU: a new service asking for CPU by itself (taskset) is refused by the kernel
service_may_run_on() {
    systemd-run --quiet --wait --collect -p Type=oneshot --unit="cs-probe-$$-$1" taskset -c "$1" true >/dev/null 2>&1
}
# reboot_and_resume: reboots the guest; the job goes on with this scenario
# (PHASE one more) in the next boot of the same disk. Checks so far are
# kept. A scenario may do so several times (header boots=N, for run.sh's
# time limit).
reboot_and_resume() {
    echo "$FAILS" >"$OUT/fails"
    echo "$S" >/var/lib/cpushield-test/resume
    echo $((PHASE + 1)) >"/var/lib/cpushield-test/$S.phase"
    sync
    info "rebooting (phase $PHASE ends)"
    systemctl reboot
    sleep 600
}
[ "$PHASE" -gt 1 ] && [ -f "$OUT/fails" ] && FAILS=$(cat "$OUT/fails")
