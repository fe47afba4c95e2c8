#!/bin/sh
# summary: a Kubernetes node's life under a shield (issue #60): on Debian 13
#   with containerd 1.7 (NRI on) and kubelet standalone (static CPU
#   manager, reserved 0-1), the package installed; a Guaranteed static pod
#   (2 CPUs, annotated irq-load-balancing.crio.io: disable) and a
#   BestEffort one. cyclictest in the Guaranteed pod under load, before any
#   shield; then cpushield-nri.service and `apply` with kubernetes = true
#   (the config file): by the kernel's own evidence no thread outside the
#   pods and no IRQ the kernel lets move on the pod's CPUs 2-3, the OS's
#   units on 0-1, kubepods untouched; cyclictest again (the ratio noted);
#   verify exit 0. kubelet restarted, then the pod deleted and made again:
#   each keeps it so. kubelet's reservedSystemCPUs changed in its file:
#   verify and status say the shield no longer matches; put back. The units
#   enabled, the node rebooted: cpushield.service shields at boot after
#   kubelet, the plugin runs, the pod comes back on 2-3 with nothing else
#   there, verify exit 0; `systemctl stop cpushield` gives each OS unit
#   back its CPUs exactly as before the first apply, kubepods untouched.
#   Two boots. Recorded: cyclictest's figures with and without.
# distro: suites=trixie-k8s reboot=yes boots=2 time=1500
# skip-why: needs the Kubernetes node image (run.sh --suite trixie-k8s --deb DEB 22-k8s-life)
# Settings: K8S_WAIT (seconds to wait for kubelet and each pod, default
# 300); K8S_CYCLIC_S (seconds of each cyclictest run, default 20).
. /job/lib.sh "$1"
. /job/k8s.sh
KCONF=/etc/kubernetes/kubelet-config.yaml
CONF=/etc/cpushield/cpushield.toml
DUR=${K8S_CYCLIC_S:-20}
cpus_placed() { [ "$(allowed "$(pid_of "$(cid rt)")")" = 2-3 ] && [ "$(allowed "$(pid_of "$(cid be)")")" = 0-1 ]; }
units() {
    for u in system.slice user.slice init.scope; do
        echo "$u effective $(cat /sys/fs/cgroup/$u/cpuset.cpus.effective 2>/dev/null) $(systemctl show -p AllowedCPUs -- "$u")"
    done
}
# movable_on CPUS: IRQs allowed on CPUS that the kernel lets move (each
# is tried: moved to 0-1 and put back); "irq list" lines
movable_on() {
    for d in /proc/irq/[0-9]*; do
        a=$(cat "$d/smp_affinity_list" 2>/dev/null) || continue
        meets "$a" "$1" || continue
        if echo 0-1 >"$d/smp_affinity_list" 2>/dev/null; then
            echo "${d#/proc/irq/} $a"; echo "$a" >"$d/smp_affinity_list" 2>/dev/null
        fi
    done
}
# evidence LABEL: what is on the pod's CPUs 2-3 by the kernel's own
# evidence, into $OUT/leaks.LABEL and $OUT/irqs.LABEL; sets LEAKS, IRQS
# (counts) and prints them
evidence() {
    thread_leaks 2-3 | grep -v ':/kubepods' >"$OUT/leaks.$1" || true
    irq_on 2-3 >"$OUT/irqs-allowed.$1"
    movable_on 2-3 >"$OUT/irqs.$1"
    LEAKS=$(wc -l <"$OUT/leaks.$1"); IRQS=$(wc -l <"$OUT/irqs.$1")
    info "$1: threads outside the pods allowed on 2-3: $LEAKS ($(awk '{print $2}' "$OUT/leaks.$1" | sed 's/[0-9]*$//' | sort | uniq -c | sort -rn | head -n 6 | awk '{printf "%s x%s, ", $2, $1}')); IRQs allowed on 2-3: $(wc -l <"$OUT/irqs-allowed.$1"), of them movable: $IRQS ($(awk '{printf "%s ", $1}' "$OUT/irqs.$1"))"
}
# holds LABEL: the checks a shielded node must pass, by the kernel's own
# evidence and kubelet's
holds() {
    evidence "$1"
    check "$1: no thread outside the pods on 2-3 but per-CPU kernel threads" [ "$LEAKS" = 0 ]
    check "$1: no IRQ the kernel lets move is on 2-3" [ "$IRQS" = 0 ]
    for u in system.slice user.slice init.scope; do
        e=$(cat /sys/fs/cgroup/$u/cpuset.cpus.effective 2>/dev/null)
        check "$1: $u on the reserved CPUs (effective '$e')" [ "$e" = 0-1 ]
    done
    k=$(allowed "$(systemctl show -p MainPID --value kubelet)")
    check "$1: kubelet runs on the reserved CPUs only ($k)" [ "$k" = 0-1 ]
    rt=$(cid rt); p=$(pid_of "$rt")
    check "$1: the Guaranteed pod's container runs on 2-3 ($(allowed "$p"))" [ "$(allowed "$p")" = 2-3 ]
    be=$(allowed "$(pid_of "$(cid be)")")
    check "$1: the BestEffort pod stays on the reserved CPUs ($be)" [ "$be" = 0-1 ]
    check "$1: no cgroup of the shield's own" sh -c "[ ! -e /sys/fs/cgroup/cpushield.slice ] && [ ! -e /sys/fs/cgroup/cpushield ]"
    cs status
    check "$1: status exit 0 ($CS_RC)" [ "$CS_RC" = 0 ]
    cs verify
    check "$1: verify exit 0 ($CS_RC)" [ "$CS_RC" = 0 ]
}
# cyclic LABEL: cyclictest inside the Guaranteed pod's container (crictl
# exec: its cgroup, its CPUs), two threads FIFO 95 on 2 and 3, 1 ms, DUR
# seconds, beside a load started as a service (stress-ng: CPU, I/O,
# memory, timers); sets MAX and AVG (µs, the worse thread's)
cyclic() {
    systemd-run --quiet --unit=cs-load-$1 --collect stress-ng --cpu 2 --io 1 --vm 1 --vm-bytes 64M --timer 1 --timeout "$((DUR + 10))s" >/dev/null 2>&1
    sleep 2
    crictl exec "$(cid rt)" /host/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 \
        --library-path /host/usr/lib/x86_64-linux-gnu /host/usr/bin/cyclictest \
        -m -q -p 95 -t 2 -a 2,3 -i 1000 -D "$DUR" >"$OUT/cyclic.$1" 2>&1
    rc=$?
    systemctl stop "cs-load-$1" 2>/dev/null
    sed 's/^/    | /' "$OUT/cyclic.$1"
    MAX=$(sed -n 's/.*Max: *\([0-9]*\).*/\1/p' "$OUT/cyclic.$1" | sort -n | tail -n1)
    AVG=$(sed -n 's/.*Avg: *\([0-9]*\).*/\1/p' "$OUT/cyclic.$1" | sort -n | tail -n1)
    check "$1: cyclictest ran in the pod for ${DUR} s (exit $rc, max ${MAX:-none} µs)" [ "$rc" = 0 ] && [ -n "$MAX" ]
}

if [ "$PHASE" = 1 ]; then
    [ -f /job/cpushield.deb ] || { check "the job has the .deb (run.sh --deb)" false; result; }
    info "kernel $(uname -r), $(kubelet --version 2>&1), $(containerd --version 2>&1 | awk '{print $3}')"
    dpkg -i /job/cpushield.deb >"$OUT/dpkg-i.out" 2>&1
    check "dpkg -i exits 0" [ $? = 0 ]
    check "cpushield-nri.service is installed, disabled" [ "$(systemctl is-enabled cpushield-nri.service 2>&1)" = disabled ]
    wait_for "$WAIT" "kubelet healthz ok" healthz
    check "kubelet's healthz says ok" healthz
    units >"$OUT/units.before"
    cp "$STATE" "$OUT/cpu_manager_state.empty" 2>/dev/null
    # The pods. The Guaranteed one is privileged (SCHED_FIFO, mlock) and
    # sees the node's /usr read-only for cyclictest (busybox has none).
    pod_manifest rt-life rt --cpus 2 --memory 256Mi --annotation irq-load-balancing.crio.io=disable --privileged-usr >"$OUT/rt.yaml"
    pod_manifest be-life be >"$OUT/be.yaml"
    cp "$OUT/rt.yaml" "$M/rt-life.yaml"; cp "$OUT/be.yaml" "$M/be-life.yaml"
    wait_for "$WAIT" "the Guaranteed pod's container running" running rt
    wait_for "$WAIT" "the BestEffort pod's container running" running be
    wait_for 30 "the Guaranteed container on 2-3" eval '[ "$(allowed "$(pid_of "$(cid rt)")")" = 2-3 ]'
    check "the Guaranteed pod's container runs on 2-3" [ "$(allowed "$(pid_of "$(cid rt)")")" = 2-3 ]

    # 1. No shield, no plugin: what is on the pod's CPUs, and cyclictest.
    evidence none
    note "k8s life: no shield: threads outside the pods allowed on 2-3: $LEAKS, IRQs the kernel lets move on 2-3: $IRQS"
    cyclic none; MAX0=$MAX; AVG0=$AVG
    echo "$MAX0 $AVG0" >"$OUT/cyclic.none.figures"

    # 2. The plugin and the shield, from the config (kubernetes = true).
    systemctl enable --now cpushield-nri.service >/dev/null 2>&1
    wait_for 30 "the plugin registered" sh -c "journalctl -u cpushield-nri -o cat --no-pager | grep -q 'registered as 90-cpushield'"
    check "cpushield-nri.service runs and registered with containerd" sh -c "journalctl -u cpushield-nri -o cat --no-pager | grep -q 'registered as 90-cpushield'"
    mkdir -p /etc/cpushield
    printf '%s\n' 'cpus = "2-3"' 'kubernetes = true' >$CONF
    cs apply
    check "apply with kubernetes = true: exit 0 ($CS_RC)" [ "$CS_RC" = 0 ]
    check "apply made the Kubernetes-mode shield" grep -q 'Kubernetes node' "$OUT/cs.out"
    wait_for 10 "the plugin's journal holds the pod" grep -q rt-life /run/cpushield/nri.json
    check "the plugin's journal holds the annotated pod" grep -q rt-life /run/cpushield/nri.json
    holds applied
    check "cpu_manager_state still gives rt 2-3 and the shared pool 0-1 (kubepods untouched)" \
        python3 -c "import json; j=json.load(open('$STATE')); assert j['defaultCpuSet'] == '0-1'; assert [v['rt'] for v in j['entries'].values()] == ['2-3']"
    cyclic shielded
    echo "$MAX $AVG" >"$OUT/cyclic.shielded.figures"
    note "k8s life: cyclictest in the Guaranteed pod under stress-ng, ${DUR} s, 2 threads FIFO 95 at 1 ms: max $MAX0 µs (avg $AVG0) without the shield, $MAX µs (avg $AVG) with it: ratio $(awk "BEGIN { if ($MAX > 0) printf \"%.1f\", $MAX0 / $MAX; else print \"n/a\" }") (QEMU TCG guest)"

    # 3. kubelet restarted: it keeps the pods and the shield holds.
    RT=$(cid rt)
    systemctl restart kubelet
    wait_for "$WAIT" "kubelet healthz ok after its restart" healthz
    sleep 6
    check "kubelet restarted: the pod's container is the same ($RT)" [ "$(cid rt)" = "$RT" ]
    holds "kubelet restarted"

    # 4. The pod deleted and made again: a new container, the same CPUs.
    # Made again under another name: a static pod's UID is its manifest's
    # hash, and kubelet 1.34, given the same UID back at once, ran the new
    # container on the shared pool 0-3 (its CPU manager dropped the old
    # assignment as stale after admitting the new one; 2 runs of 3).
    rm -f "$M/rt-life.yaml"
    wait_for "$WAIT" "the pod's container gone" gone rt
    sed 's/name: rt-life$/name: rt-life-again/' "$OUT/rt.yaml" >"$M/rt-life.yaml"
    wait_for "$WAIT" "the pod's container running again" running rt
    # kubelet gave the deleted pod's CPUs to the shared pool meanwhile
    # (the BestEffort pod on 0-3), and takes them back for the new one at
    # its CPU manager's next reconcile
    wait_for 60 "kubelet's CPU manager placed both pods again (rt 2-3, be 0-1)" cpus_placed
    check "the pod made again runs a new container" [ "$(cid rt)" != "$RT" ]
    wait_for 10 "the plugin's journal holds the new container" grep -q rt-life-again /run/cpushield/nri.json
    holds "pod made again"

    # 5. kubelet's reserved CPUs changed in its file (kubelet not restarted:
    # its running settings are what the file says, read as kubelet reads it).
    cp "$KCONF" "$OUT/kubelet-config.yaml"
    sed -i 's/^reservedSystemCPUs:.*/reservedSystemCPUs: "0"/' "$KCONF"
    info "kubelet's file now: $(grep reservedSystemCPUs "$KCONF")"
    cs verify
    check "verify after the reserved set changed: not 0 ($CS_RC)" [ "$CS_RC" != 0 ]
    check "verify names kubelet's reserved CPUs" grep -q "kubelet now reserves CPUs 0" "$OUT/cs.out"
    cs status
    check "status says the same ($CS_RC)" grep -q "kubelet now reserves CPUs 0" "$OUT/cs.out"
    cp "$OUT/kubelet-config.yaml" "$KCONF"
    cs verify
    check "the file put back: verify exit 0 ($CS_RC)" [ "$CS_RC" = 0 ]

    # 6. Enabled, rebooted.
    systemctl enable cpushield.service >/dev/null 2>&1
    check "cpushield.service enabled" [ "$(systemctl is-enabled cpushield.service)" = enabled ]
    reboot_and_resume
fi

# Phase 2: the node after its reboot.
wait_for "$WAIT" "kubelet healthz ok" healthz
for u in containerd kubelet cpushield cpushield-nri; do
    info "$u active $(systemctl show -p ActiveEnterTimestampMonotonic --value $u | awk '{printf "%.1f s", $1 / 1e6}') after boot ($(systemctl is-active $u))"
done
info "cpushield.service's log: $(journalctl -b -u cpushield -o cat --no-pager | tail -n 5 | cut -c1-160 | tr '\n' '|')"
check "cpushield.service shielded at boot (active)" systemctl is-active --quiet cpushield.service
check "cpushield.service started after kubelet" [ "$(systemctl show -p ExecMainStartTimestampMonotonic --value cpushield)" -ge "$(systemctl show -p ExecMainStartTimestampMonotonic --value kubelet)" ]
check "cpushield-nri.service runs" systemctl is-active --quiet cpushield-nri.service
wait_for "$WAIT" "the Guaranteed pod's container running" running rt
wait_for "$WAIT" "the BestEffort pod's container running" running be
wait_for 30 "the plugin's journal holds the pod" grep -q rt-life /run/cpushield/nri.json
wait_for 60 "kubelet's CPU manager placed both pods (rt 2-3, be 0-1)" cpus_placed
holds rebooted
cs off --dry-run
systemctl stop cpushield.service
check "systemctl stop cpushield: off succeeded" sh -c "! systemctl is-failed --quiet cpushield.service"
info "cpushield.service's stop: $(journalctl -b -u cpushield -o cat --no-pager | tail -n 4 | cut -c1-160 | tr '\n' '|')"
units >"$OUT/units.after"
sed 's/^/    before: /' "$OUT/units.before"; sed 's/^/    after:  /' "$OUT/units.after"
check "off gives each OS unit back its CPUs (effective) and systemd's AllowedCPUs= exactly as before the first apply" cmp -s "$OUT/units.before" "$OUT/units.after"
check "no journal left" [ ! -e /run/cpushield/journal ]
check "the pod still on 2-3 after off (kubepods untouched)" [ "$(allowed "$(pid_of "$(cid rt)")")" = 2-3 ]
check "kubelet healthy after off" healthz
k=$(allowed "$(systemctl show -p MainPID --value kubelet)")
check "kubelet may use every CPU again ($k)" [ "$k" = 0-3 ]
# the plugin still keeps the annotated pod's IRQs off its CPUs: that is
# the pod's, not the shield's
evidence "after off"
check "after off the annotated pod's CPUs still have no movable IRQ (the plugin's)" [ "$IRQS" = 0 ]
rm -f "$M/rt-life.yaml" "$M/be-life.yaml"
wait_for "$WAIT" "the pods' containers gone" sh -c "! crictl ps -q --state running | grep -q ."
wait_for 10 "the plugin's journal gone" sh -c "[ ! -e /run/cpushield/nri.json ]"
check "the pods gone: the plugin gave everything back (its journal gone)" [ ! -e /run/cpushield/nri.json ]
systemctl disable --now cpushield-nri.service >/dev/null 2>&1
journalctl -b -u cpushield-nri -o cat --no-pager >"$OUT/nri.log" 2>&1
result
