#!/bin/sh
# summary: the NRI plugin on a Kubernetes node (issue #60): on Debian 13
#   with containerd 1.7 or 2.x (NRI on) and kubelet standalone (static CPU
#   manager, reserved 0-1), no shield: `cpushield nri` runs as a service;
#   a Guaranteed static pod (2 CPUs) annotated irq-load-balancing.crio.io:
#   disable and cpu-c-states.crio.io: disable gets CPUs 2-3, and while it
#   runs every IRQ the kernel lets move is off 2-3 (each left there is
#   refused a move by the kernel, tried again here), new IRQs' default
#   affinity 0-1, PM QoS latency n/a on 2-3, irqbalance told to ban 2-3;
#   the pod deleted: every IRQ affinity, the default affinity and the PM QoS
#   files exactly as before. Then the plugin killed (SIGKILL) with the pod
#   running, the pod deleted meanwhile, the plugin started again: the
#   runtime's synchronisation gives everything back. Then containerd's
#   process killed with the pod running (its shims live on): the plugin
#   dials it again and the pod keeps its CPUs' state; deleted, all back.
#   Then killed while it moves the pod's IRQs (strace's fault injection at
#   its K-th IRQ write, half of them moved): started again it finishes the
#   pod's changes and gives all back when the pod goes; killed again and
#   left dead, nri --undo gives all back. Then containerd killed while the
#   plugin is held at that write: the pod's state whole again once it
#   restarts, all back when the pod goes. Recorded: the plugin's log.
# distro: suites=trixie-k8s,trixie-k8s2 time=1500
# skip-why: needs the Kubernetes node image (run.sh --suite trixie-k8s 21-k8s-nri, or trixie-k8s2: containerd 2.x)
# Settings: K8S_WAIT (seconds to wait for kubelet and each pod, default 300).
. /job/lib.sh "$1"
. /job/k8s.sh
J=/run/cpushield/nri.json
# the state the plugin changes and must give back
state() {
    for d in /proc/irq/[0-9]*; do echo "${d#/proc/irq/} $(cat "$d/smp_affinity_list" 2>/dev/null)"; done
    echo "default $(cat /proc/irq/default_smp_affinity)"
    for c in 0 1 2 3; do echo "pmqos$c $(cat /sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us 2>/dev/null)"; done
}
# same_state A B DESCRIPTION: the states equal, but for IRQs irqbalance
# placed anew in between (one CPU before, one after: its placements)
same_state() {
    awk 'NR == FNR { a[$1] = $2; next }
        { b = $2; was = ($1 in a) ? a[$1] : "(none)"; seen[$1] = 1
          if (was == b) next
          if ($1 ~ /^[0-9]+$/ && was ~ /^[0-9]+$/ && b ~ /^[0-9]+$/) { print "irqbalance " $1 ": " was " -> " b > "/dev/stderr"; next }
          print $1 ": " was " -> " b }
        END { for (k in a) if (!(k in seen)) print k ": " a[k] " -> (gone)" }' \
        "$OUT/$1" "$OUT/$2" >"$OUT/diff.$2" 2>"$OUT/diff.$2.irqbalance"
    [ -s "$OUT/diff.$2.irqbalance" ] && info "IRQs irqbalance placed anew in between: $(tr '\n' ' ' <"$OUT/diff.$2.irqbalance")"
    sed 's/^/    /' "$OUT/diff.$2"
    check "$3" [ ! -s "$OUT/diff.$2" ]
}
plugin_log() { journalctl -u cpushield-nri -o cat --no-pager 2>/dev/null; }
registrations() { plugin_log | grep -c 'registered as'; }
# registered_since N: the plugin registered more than N times in all
registered_since() { [ "$(registrations)" -gt "$1" ]; }
start_plugin() {
    systemctl reset-failed cpushield-nri 2>/dev/null
    systemd-run --quiet --unit=cpushield-nri -p Restart=no /job/cpushield nri
}

wait_for "$WAIT" "kubelet healthz ok" healthz
check "NRI's socket exists" [ -S /var/run/nri/nri.sock ]
info "irqbalance: $(systemctl is-active irqbalance) (pid $(systemctl show -p MainPID --value irqbalance))"
state >"$OUT/state.before"
info "IRQs allowed on 2-3 before the plugin: $(awk '$1 ~ /^[0-9]+$/' "$OUT/state.before" | while read -r q a; do meets "$a" 2-3 && printf '%s ' "$q"; done)"

start_plugin
wait_for 30 "the plugin registered" sh -c "journalctl -u cpushield-nri -o cat --no-pager | grep -q 'registered as 90-cpushield'"
check "the plugin registered with containerd" sh -c "journalctl -u cpushield-nri -o cat --no-pager | grep -q 'registered as 90-cpushield'"

pod_manifest rt-nri rt --cpus 2 --memory 32Mi --annotation irq-load-balancing.crio.io=disable --annotation cpu-c-states.crio.io=disable --annotation cpu-freq-governor.crio.io=performance --annotation cpu-quota.crio.io=disable >"$OUT/rt.yaml"
pod_up() {
    cp "$OUT/rt.yaml" "$M/rt-nri.yaml"
    wait_for "$WAIT" "the Guaranteed pod's container running" running rt
}
pod_down() {
    rm -f "$M/rt-nri.yaml"
    wait_for "$WAIT" "the pod's container gone" gone rt
}
applied() { [ "$(cat /sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us)" = n/a ]; }

# 1. start and stop
pod_up
wait_for 10 "the plugin's changes" applied
RT=$(cid rt)
CPUS=$(allowed "$(pid_of "$RT")")
check "the pod's container runs on CPUs 2-3 ($CPUS)" [ "$CPUS" = 2-3 ]
state >"$OUT/state.applied"
info "the plugin's journal: $(tr -d '\n ' <$J | cut -c1-300)"
info "the plugin's log: $(plugin_log | tail -n 6 | tr '\n' '|')"
check "PM QoS resume latency of CPU 3 is n/a" [ "$(cat /sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us)" = n/a ]
check "PM QoS resume latency of CPUs 0 and 1 as before" [ "$(grep '^pmqos[01]' "$OUT/state.before")" = "$(grep '^pmqos[01]' "$OUT/state.applied")" ]
check "new IRQs' default affinity is 0-1 (mask 3)" [ "$(cat /proc/irq/default_smp_affinity | sed 's/^0*//')" = 3 ]
check "the plugin's journal holds the pod's container" grep -q 'rt-nri' $J
check "the log says the governor is not offered or set (no cpufreq in the guest)" sh -c "journalctl -u cpushield-nri -o cat --no-pager | grep -q 'governor'"
RT_CG=$(cgroup_of "$RT")
info "cpu.max of the pod's container: $(cat "$RT_CG/cpu.max"), of its pod: $(cat "${RT_CG%/*}/cpu.max")"
check "cpu-quota.crio.io read back: kubelet set no quota, and the log says so" sh -c "journalctl -u cpushield-nri -o cat --no-pager | grep -q 'cpu-quota.crio.io: disable: no CFS quota on it or its pod'"
irqb=$(systemctl show -p MainPID --value irqbalance)
if [ "${irqb:-0}" != 0 ] && [ -S /run/irqbalance/irqbalance$irqb.sock ]; then
    check "irqbalance was told a ban (the journal holds the one it had before)" grep -q '"irqbalance": \[' $J
fi
movable_left 2-3; left=$?
check "no IRQ the kernel lets move is on 2-3 while the pod runs ($left were)" [ $left = 0 ]
note "k8s node: NRI plugin: IRQs allowed on 2-3 with the pod running: $(awk '$1 ~ /^[0-9]+$/' "$OUT/state.applied" | while read -r q a; do meets "$a" 2-3 && printf '%s ' "$q"; done)(each refused a move by the kernel); before: $(awk '$1 ~ /^[0-9]+$/' "$OUT/state.before" | while read -r q a; do meets "$a" 2-3 && printf '%s ' "$q"; done)"
pod_down
sleep 1
state >"$OUT/state.after"
same_state state.before state.after "the pod deleted: IRQ affinities, default affinity and PM QoS as before"
check "the plugin's journal is gone" [ ! -e $J ]

# 2. the plugin killed with the pod running; the pod deleted meanwhile
pod_up
wait_for 10 "the plugin's changes" applied
systemctl kill -s KILL cpushield-nri
sleep 1
check "the plugin is dead" sh -c "! systemctl is-active --quiet cpushield-nri"
check "its journal stays" [ -e $J ]
pod_down
check "with the plugin dead the pod's changes stay" applied
start_plugin
wait_for 30 "the restarted plugin gave everything back" sh -c "[ ! -e $J ]"
state >"$OUT/state.after2"
same_state state.before state.after2 "the plugin restarted: the runtime's synchronisation gave everything back"

# 3. containerd killed with the pod running: the plugin dials it again
pod_up
wait_for 10 "the plugin's changes" applied
n0=$(registrations)
RT_PID=$(pid_of "$(cid rt)")
# containerd's own process only, as a crash would: its shims, and the
# containers under them, live on (systemctl kill would kill the shims in
# containerd's cgroup too)
kill -KILL "$(systemctl show -p MainPID --value containerd)"
wait_for 60 "containerd active again" systemctl is-active --quiet containerd
wait_for 30 "the plugin registered again" registered_since "$n0"
check "the plugin registered again after containerd's restart" registered_since "$n0"
check "the pod's process lived through containerd's restart (pid $RT_PID)" [ -d /proc/$RT_PID ]
check "the running pod keeps its CPUs' state" applied
pod_down
wait_for 30 "everything given back" sh -c "[ ! -e $J ]"
state >"$OUT/state.after3"
same_state state.before state.after3 "the pod deleted after containerd's restart: everything as before"

# 4. and 5. killed while it moves the pod's IRQs: strace's fault injection
# stops the plugin at its K-th write to an IRQ's affinity file (-P: those
# files only), from outside the plugin, so that the first K-1 of them are
# moved and the rest not.
CAND=$(awk '$1 ~ /^[0-9]+$/' "$OUT/state.before" | while read -r q a; do meets "$a" 2-3 && printf '%s ' "$q"; done)
PATHS=""; for q in $CAND; do PATHS="$PATHS -P /proc/irq/$q/smp_affinity_list"; done
ncand=$(echo $CAND | wc -w)
# those the kernel let the plugin move in part 1 (the others it refuses)
movable=$(awk '$1 ~ /^[0-9]+$/' "$OUT/state.applied" | while read -r q a; do case " $CAND " in *" $q "*) meets "$a" 2-3 || echo "$q" ;; esac; done | wc -l)
K=$(( ncand / 2 + 1 ))
# how many of the IRQs that were on 2-3 are off it now
moved_now() { n=0; for q in $CAND; do meets "$(cat /proc/irq/$q/smp_affinity_list)" 2-3 || n=$((n + 1)); done; echo $n; }
plugin_pid() { systemctl show -p MainPID --value cpushield-nri; }
# inject ACTION: strace on the plugin, in the background, until it ends
inject() {
    # shellcheck disable=SC2086
    strace -qq -o "$OUT/strace.$2" -e trace=write $PATHS -e inject=write:$1:when=$K -p "$(plugin_pid)" &
    STRACE=$!
    sleep 1
}
# whole_then_back NAME WHAT: with the pod running, no IRQ the kernel lets
# move is on 2-3; the pod deleted, the journal goes and the state is as
# before (state.NAME)
whole_then_back() {
    movable_left 2-3; left=$?
    check "$2, the pod running: no IRQ the kernel lets move is on 2-3 ($left were)" [ $left = 0 ]
    pod_down
    wait_for 30 "everything given back" sh -c "[ ! -e $J ]"
    state >"$OUT/state.$1"
    same_state state.before "state.$1" "$2, the pod deleted: everything as before"
}
# killed_mid_move NAME: the pod started with the plugin killed at its
# K-th IRQ write; checks that it was, in the middle of the moves
killed_mid_move() {
    inject signal=SIGKILL "$1"
    pod_up
    wait_for 30 "the plugin killed by the injected SIGKILL" sh -c "! systemctl is-active --quiet cpushield-nri"
    wait $STRACE 2>/dev/null
    m=$(moved_now)
    note "k8s node: NRI plugin killed at its IRQ write $K of $ncand ($1): $m of the pod's $movable movable IRQs were off 2-3"
    check "the plugin was killed in the middle of moving the IRQs ($1: $m of $movable moved)" [ "$m" -ge 1 -a "$m" -lt "$movable" ]
}
info "IRQs on 2-3 before: $ncand ($CAND), $movable of them movable; the kill comes at write $K"
check "at least 2 IRQs to move, so a kill can come between two ($movable)" [ "$movable" -ge 2 ]

# 4a. killed mid-move with the pod running; started again: the runtime's
# synchronisation finishes the pod's changes; the pod deleted: all back
killed_mid_move kill-a
check "its journal holds what it changed" [ -e $J ]
start_plugin
wait_for 30 "the restarted plugin finished the pod's changes" applied
whole_then_back after4a "killed mid-move, restarted"

# 4b. killed mid-move; the plugin stays dead: nri --undo (its off) gives
# everything back, the pod still running
killed_mid_move kill-b
/job/cpushield nri --undo >"$OUT/undo.out" 2>&1; rc=$?
info "nri --undo: $(tr '\n' '|' <"$OUT/undo.out")"
check "nri --undo after a kill mid-move exits 0 ($rc)" [ $rc = 0 ]
check "nri --undo leaves no journal" [ ! -e $J ]
state >"$OUT/state.after4b"
same_state state.before state.after4b "killed mid-move, nri --undo: everything as before (the pod still running)"
pod_down
start_plugin
wait_for 30 "the plugin registered" registered_since 0

# 5. containerd killed while the plugin moves the pod's IRQs: the plugin
# held 20 s at its K-th IRQ write; containerd's process killed as soon
# as the plugin's journal shows (it is written before the first IRQ)
n0=$(registrations)
inject delay_enter=20000000 delay
pod_up &
UP=$!
i=0; while [ ! -e $J ] && [ $i -lt 3000 ]; do sleep 0.05; i=$((i + 1)); done
kill -KILL "$(systemctl show -p MainPID --value containerd)"
sleep 1
m=$(moved_now)
note "k8s node: containerd killed with $m of the pod's $movable movable IRQs moved (the plugin held at its IRQ write $K)"
check "containerd was killed in the middle of the plugin's moves ($m of $movable moved)" [ "$m" -ge 1 -a "$m" -lt "$movable" ]
wait $UP
# the plugin lives on: strace ends only when told (it detaches)
kill $STRACE 2>/dev/null; wait $STRACE 2>/dev/null
wait_for 60 "containerd active again" systemctl is-active --quiet containerd
wait_for 30 "the plugin registered again" registered_since "$n0"
check "the plugin lived through containerd's death" systemctl is-active --quiet cpushield-nri
check "and registered again" registered_since "$n0"
wait_for "$WAIT" "the pod's container running" running rt
wait_for 30 "the pod's changes" applied
whole_then_back after5 "containerd killed mid-move and back"

info "the plugin's log: $(plugin_log | tail -n 12 | tr '\n' '|')"
systemctl stop cpushield-nri
result
