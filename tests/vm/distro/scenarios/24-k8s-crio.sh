#!/bin/sh
# summary: the CRI-O Kubernetes node, then cpushield beside it: on
#   Debian 13 with CRI-O 1.34 (systemd cgroup manager, runc, NRI on, the
#   high-performance annotations allowed on the default runtime) and
#   kubelet standalone (static pods, static CPU manager, reservedSystemCPUs
#   0-1), kubelet is healthy and CRI-O's runtime ready, NRI's socket
#   exists; a Guaranteed static pod (2 CPUs) annotated
#   irq-load-balancing.crio.io: disable and cpu-c-states.crio.io:
#   max_latency:20 gets CPUs 2-3 (cpu_manager_state, its cgroup's
#   effective CPUs, its process) and no CFS quota from its container's
#   cgroup up to its pod's slice (kubelet gives quota -1 with exclusive
#   CPUs; crun 1.21 made that 1 ms per 100 ms), and while it runs CRI-O's
#   high-performance hooks hold: default_smp_affinity without 2-3, PM QoS
#   resume latency 20 on 2-3 (0-1 as before), CRI-O's save files
#   /var/run/crio/cpu/cpuN/power/pm_qos_resume_latency_us holding the
#   previous values; a BestEffort pod on 0-1. The pod deleted (its manifest
#   removed): default_smp_affinity and PM QoS as before, the save files
#   gone. Recorded (not asserted): every IRQ's smp_affinity_list before,
#   while the pod runs (at once and 15 s later) and after (at once and 15 s
#   later), which IRQs moved onto 2-3 after the deletion, what CRI-O ran of
#   irqbalance (a logging wrapper /usr/local/sbin/irqbalance in CRI-O's
#   PATH: arguments, IRQBALANCE_BANNED_CPUS, exit status), whether
#   /etc/sysconfig/irqbalance exists, irqbalance's service pid through it
#   all, CRI-O's hook lines in its journal, and the versions.
#   Then cpushield (issue #60): `cpushield nri` stands aside on CRI-O (its
#   log, no journal); `on 2-3 --max-idle-latency 10us` (the Kubernetes
#   mode); the annotated pod started: its PM QoS 20 is CRI-O's (saved: the
#   shield's 10) and `status` exits 0 saying so; the pod deleted: CRI-O's
#   stop hook gives 2-3 back to IRQs, and the healer repairs it (status
#   exit 0 within 6 s, counted `drift`), PM QoS the shield's again; `off`
#   with the pod running leaves its PM QoS to CRI-O and hands it the values
#   from before the shield; the pod deleted, the node as before the shield.
# distro: suites=trixie-crio time=1200
# skip-why: needs the CRI-O Kubernetes node image (run.sh --suite trixie-crio --binary BIN 24-k8s-crio)
# Settings: K8S_WAIT (seconds to wait for kubelet and each pod, default 300).
. /job/lib.sh "$1"
. /job/k8s.sh
SAVE=/var/run/crio/cpu
# irqs: "N smp_affinity_list effective_affinity_list name" per IRQ
irqs() {
    for d in /proc/irq/[0-9]*; do
        n=${d#/proc/irq/}
        printf '%s %s %s %s\n' "$n" "$(cat "$d/smp_affinity_list" 2>/dev/null)" \
            "$(cat "$d/effective_affinity_list" 2>/dev/null || echo -)" \
            "$(awk -v n="$n:" '$1 == n { print $NF }' /proc/interrupts)"
    done | sort -n
}
pmqos() { for c in 0 1 2 3; do printf 'cpu%s=%s ' "$c" "$(cat /sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us 2>/dev/null)"; done; }
saves() { for c in 0 1 2 3; do f=$SAVE/cpu$c/power/pm_qos_resume_latency_us; [ -f "$f" ] && printf 'cpu%s:%s ' "$c" "$(cat "$f")"; done; true; }
default_aff() { cat /proc/irq/default_smp_affinity; }
# mask_meets HEXMASK BITS: the mask has one of BITS (e.g. 0xc for CPUs 2-3)
mask_meets() { [ $(( 0x$(echo "$1" | tr -d ',') & $2 )) != 0 ]; }
mask_off() { ! mask_meets "$1" "$2"; }
irqbalance_main() { echo "$(systemctl is-active irqbalance) pid $(systemctl show -p MainPID --value irqbalance)"; }
# irq_changes A B: the IRQs whose smp_affinity_list differs between two irqs outputs
irq_changes() {
    awk 'NR == FNR { a[$1] = $2; nm[$1] = $4; next }
        { was = ($1 in a) ? a[$1] : "(none)"; if (was != $2) printf "%s(%s): %s -> %s; ", $1, $4, was, $2 }' "$OUT/$1" "$OUT/$2"
}
# onto_23 A B: the IRQs not on 2-3 in A and allowed on 2-3 in B
onto_23() {
    awk 'function on23(l,   n, a, i, r) { n = split(l, a, ","); for (i = 1; i <= n; i++) { split(a[i], r, "-"); if (r[2] == "") r[2] = r[1]; if (r[1] + 0 <= 3 && r[2] + 0 >= 2) return 1 } return 0 }
        NR == FNR { a[$1] = $2; next }
        ($1 in a) && on23($2) && !on23(a[$1]) { printf "%s(%s): %s -> %s; ", $1, $4, a[$1], $2 }' "$OUT/$1" "$OUT/$2"
}

# 0. What the node is.
info "kernel $(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup), $(nproc) CPUs online ($(cat /sys/devices/system/cpu/online))"
CRIO_V=$(crio version 2>&1 | sed -n 's/^Version: *//p' | head -n1)
info "crio --version: $(crio --version 2>&1 | head -n1)"
info "crio version: $(crio version 2>&1 | grep -E '^(Version|GitCommit|BuildDate|GoVersion|Compiler|Linkmode|BuildTags|SeccompEnabled|AppArmorEnabled)' | tr -s ' ' | tr '\n' ';')"
info "kubelet: $(kubelet --version 2>&1); crictl: $(crictl --version 2>&1)"
info "runc: $(runc --version 2>&1 | head -n1); crun: $(crun --version 2>&1 | head -n1); conmon: $(conmon --version 2>&1 | head -n1); skopeo: $(skopeo --version 2>&1)"
info "irqbalance: $(dpkg-query -W -f '${Version}' irqbalance 2>/dev/null), $(irqbalance_main)"
info "binaries built by the test bed: $(tr '\n' ';' </var/lib/cpushield-k8s/versions.txt)"
note "k8s crio node: CRI-O $CRIO_V, $(kubelet --version 2>&1), $(runc --version 2>&1 | head -n1), conmon $(conmon --version 2>&1 | head -n1 | awk '{print $3}')"
for u in crio-images crio kubelet multi-user.target; do
    info "$u active $(systemctl show -p ActiveEnterTimestampMonotonic --value $u | awk '{printf "%.1f s", $1 / 1e6}') after boot"
done
info "this job started $(systemctl show -p ExecMainStartTimestampMonotonic --value cpushield-job | awk '{printf "%.1f s", $1 / 1e6}') after boot"
info "slowest units: $(systemd-analyze blame --no-pager 2>/dev/null | head -n 6 | awk '{$1=$1; print}' | tr '\n' ';')"
check "the OCI images were copied into containers-storage (crio-images.service)" systemctl is-active --quiet crio-images
check "crio is active" systemctl is-active --quiet crio
journalctl -b -u crio-images -o cat --no-pager 2>&1 | tail -n 5 | sed 's/^/    crio-images| /'
wait_for "$WAIT" "kubelet healthz ok" healthz
check "kubelet is active" systemctl is-active --quiet kubelet
check "kubelet's healthz says ok" healthz
info "images in CRI-O: $(crictl images 2>&1 | tail -n +2 | awk '{print $1 ":" $2}' | tr '\n' ' ')"
check "CRI-O lists the busybox image" sh -c "crictl images 2>/dev/null | grep -q 'localhost/busybox *cpushield'"
check "CRI-O lists the pause image" sh -c "crictl images 2>/dev/null | grep -q 'localhost/pause *cpushield'"
crictl info >"$OUT/crictl-info.json" 2>&1 || true
info "CRI conditions: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(" ".join("%s=%s" % (c["type"], c["status"]) for c in j["status"]["conditions"]))' "$OUT/crictl-info.json" 2>&1)"
check "CRI-O says RuntimeReady (crictl info)" python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if any(c["type"] == "RuntimeReady" and c["status"] for c in j["status"]["conditions"]) else 1)' "$OUT/crictl-info.json"
info "kubelet on CRI-O: $(journalctl -b -u kubelet -o cat --no-pager 2>/dev/null | grep -m2 -i 'container runtime\|runtime name\|cri-o' | cut -c1-220 | tr '\n' '|')"
if [ -S /var/run/nri/nri.sock ]; then
    info "NRI socket /var/run/nri/nri.sock: present"; note "k8s crio node: CRI-O's NRI on (enable_nri): /var/run/nri/nri.sock exists"
else
    info "NRI socket /var/run/nri/nri.sock: absent"; note "k8s crio node: enable_nri = true, yet no /var/run/nri/nri.sock"
fi
check "NRI's socket exists (CRI-O, enable_nri)" [ -S /var/run/nri/nri.sock ]
check "cpu_manager_state says policy static" [ "$(manager_state "j['policyName']")" = static ]
info "cpu_manager_state before any pod: $(cat "$STATE")"
if [ -e /etc/sysconfig/irqbalance ]; then
    info "/etc/sysconfig/irqbalance exists: $(tr '\n' '|' </etc/sysconfig/irqbalance)"
    note "k8s crio node: /etc/sysconfig/irqbalance exists (CRI-O edits it and restarts irqbalance)"
else
    info "/etc/sysconfig/irqbalance: absent (Debian's irqbalance reads /etc/default/irqbalance); irqbalance.service $(systemctl is-enabled irqbalance 2>&1)"
    note "k8s crio node: no /etc/sysconfig/irqbalance: CRI-O runs irqbalance --oneshot with IRQBALANCE_BANNED_CPUS"
fi
info "CRI-O at its start about irqbalance: $(journalctl -b -u crio -o cat --no-pager 2>/dev/null | grep -i 'irqbalance' | cut -c1-200 | tr '\n' '|')"
# CRI-O looks irqbalance up in its PATH (exec.LookPath): a wrapper ahead of
# /usr/sbin logs what it is asked, then runs the real one the same way
cat >/usr/local/sbin/irqbalance <<'EOF'
#!/bin/sh
L=/run/crio-irqbalance.log
echo "$(cut -d' ' -f1 /proc/uptime)s: irqbalance $* (parent $(cat /proc/$PPID/comm 2>/dev/null)) IRQBALANCE_BANNED_CPUS='${IRQBALANCE_BANNED_CPUS-(unset)}' IRQBALANCE_BANNED_CPULIST='${IRQBALANCE_BANNED_CPULIST-(unset)}'" >>$L
/usr/sbin/irqbalance "$@" >>$L.out 2>&1
rc=$?
echo "$(cut -d' ' -f1 /proc/uptime)s: exit $rc" >>$L
exit $rc
EOF
chmod 755 /usr/local/sbin/irqbalance
info "CRI-O's PATH: $(tr '\0' '\n' </proc/"$(systemctl show -p MainPID --value crio)"/environ | sed -n 's/^PATH=//p') (systemd's default when empty: /usr/local/sbin first)"

# 1. Before the pods.
irqs >"$OUT/irqs.before"
D_BEFORE=$(default_aff); P_BEFORE=$(pmqos); IB_BEFORE=$(irqbalance_main)
info "before: default_smp_affinity $D_BEFORE; pm_qos_resume_latency_us $P_BEFORE; save files: '$(saves)'; irqbalance $IB_BEFORE"
info "IRQs before (N smp_affinity_list effective name):"; sed 's/^/    before| /' "$OUT/irqs.before"

# 2. The pods: a Guaranteed one with CRI-O's annotations, a BestEffort one.
pod_manifest rt-crio rt --cpus 2 --memory 32Mi --annotation irq-load-balancing.crio.io=disable --annotation cpu-c-states.crio.io=max_latency:20 >"$OUT/rt.yaml"
pod_manifest be-shared be >"$OUT/be.yaml"
cp "$OUT/be.yaml" "$M/"
wait_for "$WAIT" "the BestEffort pod's container be running" running be
cp "$OUT/rt.yaml" "$M/"
wait_for "$WAIT" "the Guaranteed pod's container rt running" running rt
check "the Guaranteed pod's container runs" running rt
check "the BestEffort pod's container runs" running be
crictl pods >"$OUT/pods.txt" 2>&1; crictl ps -a >"$OUT/containers.txt" 2>&1
sed 's/^/    | /' "$OUT/pods.txt" "$OUT/containers.txt"
# CRI-O's pre-start hook runs before the container starts; the CPU
# manager's reconcile loop (5 s here) writes the cgroups
sleep 6
irqs >"$OUT/irqs.during"
D_DURING=$(default_aff); P_DURING=$(pmqos); IB_DURING=$(irqbalance_main)
info "cpu_manager_state: $(cat "$STATE")"
RT_UID=$(crictl inspectp -o go-template --template '{{.status.metadata.uid}}' "$(crictl pods --name rt-crio -q | head -n1)" 2>/dev/null)
check "cpu_manager_state gives container rt CPUs 2-3" [ "$(manager_state "j['entries']['$RT_UID']['rt']")" = 2-3 ]
check "cpu_manager_state's shared pool (defaultCpuSet) is 0-1" [ "$(manager_state "j['defaultCpuSet']")" = 0-1 ]
RT=$(cid rt); BE=$(cid be)
RT_CG=$(cgroup_of "$RT"); BE_CG=$(cgroup_of "$BE")
info "rt's cgroup: $RT_CG; be's cgroup: $BE_CG"
check "rt's cgroup is under kubepods.slice, CRI-O's scope (systemd cgroup manager)" sh -c "echo '$RT_CG' | grep -q '^/sys/fs/cgroup/kubepods.slice/kubepods-pod.*\.slice/crio-.*\.scope'"
pods_on_their_cpus
# cpu.max from the container's cgroup up to the pod's slice (crun puts the
# process in a "container" cgroup below CRI-O's scope)
d=$RT_CG; line=""; quota=""
while [ "${d#/sys/fs/cgroup/kubepods.slice/}" != "$d" ]; do
    line="$line${d##*/}: '$(cat "$d/cpu.max" 2>/dev/null)'; "
    case $(cat "$d/cpu.max" 2>/dev/null) in max\ *) ;; *) quota="$quota ${d##*/}" ;; esac
    case ${d##*/} in kubepods-pod*) break ;; esac
    d=${d%/*}
done
info "rt's cpu.max upwards: $line"
check "no CFS quota on rt's cgroups up to its pod's slice (the Guaranteed pod is not throttled)" [ -z "$quota" ]
info "rt's OCI spec, linux.resources.cpu: $(crictl inspect -o go-template --template '{{.info.runtimeSpec.linux.resources.cpu}}' "$RT" 2>&1 | tr '\n' ' ')"
scope=$(echo "$RT_CG" | sed -n 's|.*/\(crio-[0-9a-f]*\.scope\).*|\1|p')
info "systemd's $scope: $(systemctl show -p CPUQuotaPerSecUSec -p CPUQuotaPeriodUSec -p AllowedCPUs -- "$scope" 2>&1 | tr '\n' ' '); the pod's slice: $(systemctl show -p CPUQuotaPerSecUSec -p CPUQuotaPeriodUSec -- "$(basename "$(dirname "$(dirname "$RT_CG")")")" 2>&1 | tr '\n' ' ')"

# 3. CRI-O's hooks while the pod runs.
info "while rt runs: default_smp_affinity $D_DURING; pm_qos_resume_latency_us $P_DURING; save files: '$(saves)'; irqbalance $IB_DURING"
check "default_smp_affinity without CPUs 2-3 while the pod runs ($D_BEFORE -> $D_DURING)" mask_off "$D_DURING" 0xc
for c in 2 3; do
    v=$(cat /sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us)
    check "CPU $c's pm_qos_resume_latency_us is 20 (max_latency:20) ($v)" [ "$v" = 20 ]
    f=$SAVE/cpu$c/power/pm_qos_resume_latency_us
    was=$(echo "$P_BEFORE" | tr ' ' '\n' | sed -n "s/^cpu$c=//p")
    check "CRI-O's save file $f holds the previous value '$was' ($(cat "$f" 2>/dev/null || echo absent))" [ "$(cat "$f" 2>/dev/null)" = "$was" ]
done
for c in 0 1; do
    was=$(echo "$P_BEFORE" | tr ' ' '\n' | sed -n "s/^cpu$c=//p")
    check "CPU $c's pm_qos_resume_latency_us as before ('$was')" [ "$(cat /sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us)" = "$was" ]
done
info "IRQs that changed on the pod's start: $(irq_changes irqs.before irqs.during)"
info "IRQs allowed on 2-3 while rt runs: $(awk '{print $1, $2}' "$OUT/irqs.during" | while read -r n l; do meets "$l" 2-3 && printf '%s(%s) ' "$n" "$l"; done)"
sed 's/^/    during| /' "$OUT/irqs.during"
info "what CRI-O ran of irqbalance: $(tr '\n' '|' </run/crio-irqbalance.log 2>/dev/null || echo nothing); its output: $(tr '\n' '|' </run/crio-irqbalance.log.out 2>/dev/null | cut -c1-300)"
# irqbalance's daemon rebalances every 10 s: does it keep off 2-3?
sleep 15
irqs >"$OUT/irqs.during15"
info "15 s later: default_smp_affinity $(default_aff); irqbalance $(irqbalance_main); IRQs changed since the first look: $(irq_changes irqs.during irqs.during15)"
info "IRQs allowed on 2-3 15 s later: $(awk '{print $1, $2}' "$OUT/irqs.during15" | while read -r n l; do meets "$l" 2-3 && printf '%s(%s) ' "$n" "$l"; done)"
journalctl -b -u crio -o short-monotonic --no-pager >"$OUT/crio.journal" 2>&1
grep -i 'irq\|c-state\|pre-start\|pre-stop' "$OUT/crio.journal" >"$OUT/crio-hooks.during" || true
info "CRI-O's hook lines so far:"; cut -c1-300 "$OUT/crio-hooks.during" | sed 's/^/    crio| /'
check "CRI-O logged its pre-start hook for the container" grep -qi 'pre-start hook' "$OUT/crio-hooks.during"
check "CRI-O logged disabling IRQ balancing for the container" grep -q 'Disable irq smp balancing' "$OUT/crio-hooks.during"
check "CRI-O logged the c-states (pm_qos_resume_latency_us \"20\")" grep -q 'Configure c-states.*max_latency:20' "$OUT/crio-hooks.during"

# 4. The Guaranteed pod deleted: CRI-O's pre-stop hook gives back.
rm -f "$M/rt.yaml"
wait_for 180 "rt's container stopped" sh -c "! crictl ps --state running --name '^rt\$' -q | grep -q ."
check "rt's container stopped after its manifest was removed" sh -c "! crictl ps --state running --name '^rt\$' -q | grep -q ."
sleep 2
irqs >"$OUT/irqs.after"
D_AFTER=$(default_aff); P_AFTER=$(pmqos); IB_AFTER=$(irqbalance_main)
info "after: default_smp_affinity $D_AFTER; pm_qos_resume_latency_us $P_AFTER; save files: '$(saves)'; irqbalance $IB_AFTER"
check "default_smp_affinity as before the pod ($D_BEFORE; after $D_AFTER)" [ "$D_AFTER" = "$D_BEFORE" ]
check "CPUs 2-3 back in default_smp_affinity ($D_AFTER)" mask_meets "$D_AFTER" 0xc
check "pm_qos_resume_latency_us as before on every CPU ($P_AFTER)" [ "$P_AFTER" = "$P_BEFORE" ]
check "CRI-O's save files are gone ('$(saves)')" [ -z "$(saves)" ]
info "IRQs that changed on the pod's deletion: $(irq_changes irqs.during15 irqs.after)"
info "IRQs moved onto 2-3 by the deletion: $(onto_23 irqs.during15 irqs.after)"
info "IRQs different from before the pod: $(irq_changes irqs.before irqs.after)"
sed 's/^/    after| /' "$OUT/irqs.after"
info "what CRI-O ran of irqbalance, in all: $(tr '\n' '|' </run/crio-irqbalance.log 2>/dev/null || echo nothing)"
sleep 15
irqs >"$OUT/irqs.after15"
info "15 s later: default_smp_affinity $(default_aff); irqbalance $(irqbalance_main); IRQs changed since: $(irq_changes irqs.after irqs.after15)"
info "15 s later, IRQs different from before the pod: $(irq_changes irqs.before irqs.after15)"
info "15 s later, IRQs moved onto 2-3 since the pod ran: $(onto_23 irqs.during15 irqs.after15)"
note "k8s crio node: default_smp_affinity $D_BEFORE before, $D_DURING with the pod, $D_AFTER after; pm_qos $P_BEFORE/ $P_DURING/ $P_AFTER"
note "k8s crio node: irqbalance run by CRI-O: $(grep -c 'irqbalance ' /run/crio-irqbalance.log 2>/dev/null || echo 0) times: $(grep 'irqbalance ' /run/crio-irqbalance.log 2>/dev/null | sed 's/^[0-9.]*s: //; s/ (parent [^)]*)//' | tr '\n' '|')"
note "k8s crio node: IRQs onto 2-3 after the pod's deletion (15 s): $(onto_23 irqs.during15 irqs.after15)"

# 5. The rest goes.
rm -f "$M/be.yaml"
wait_for 120 "no container left running" sh -c "! crictl ps -q --state running | grep -q ."
check "no container left running after the manifests were removed" sh -c "! crictl ps -q --state running | grep -q ."
journalctl -b -u crio -o short-monotonic --no-pager >"$OUT/crio.journal" 2>&1
journalctl -b -u kubelet -o short-monotonic --no-pager >"$OUT/kubelet.journal" 2>&1
journalctl -b -u irqbalance -o short-monotonic --no-pager >"$OUT/irqbalance.journal" 2>&1
journalctl -b -t irqbalance -o short-monotonic --no-pager >"$OUT/irqbalance-tag.journal" 2>&1
cp /run/crio-irqbalance.log /run/crio-irqbalance.log.out "$OUT/" 2>/dev/null
grep -i 'irq\|c-state\|pre-start\|pre-stop' "$OUT/crio.journal" >"$OUT/crio-hooks" || true
info "CRI-O's hook lines (journalctl -u crio | grep -i 'irq\\|c-state\\|pre-start\\|pre-stop'):"
cut -c1-300 "$OUT/crio-hooks" | sed 's/^/    crio| /'
check "CRI-O logged its pre-stop hook for the container" grep -qi 'pre-stop hook' "$OUT/crio-hooks"
info "irqbalance's journal (unit and tag), last lines:"; cat "$OUT/irqbalance.journal" "$OUT/irqbalance-tag.journal" | sort -u | tail -n 12 | cut -c1-200 | sed 's/^/    irqbalance| /'
info "CRI-O's warnings and errors: $(grep -c 'level=warn\|level=error\|level=fatal' "$OUT/crio.journal")"
grep 'level=warn\|level=error\|level=fatal' "$OUT/crio.journal" | cut -c1-250 | sort -u | head -n 15 | sed 's/^/    crio| /'
# 6. cpushield beside CRI-O's hooks (issue #60): a Kubernetes-mode shield
#    on 2-3 with PM QoS bounded to 10 µs, and the NRI plugin running.
info "6. a Kubernetes-mode shield on 2-3 beside CRI-O's high-performance hooks"
snap s0
D0=$(default_aff); P0=$(pmqos)
/job/cpushield nri >"$OUT/nri.log" 2>&1 &
NRI=$!
wait_for 30 "the plugin registered with CRI-O" grep -q 'registered as' "$OUT/nri.log"
check "cpushield nri, configured by CRI-O, stands aside (its log)" grep -q "CRI-O's high-performance hooks carry out" "$OUT/nri.log"
cs on 2-3 --max-idle-latency 10us
check "on 2-3 --max-idle-latency 10us exits 0" [ "$CS_RC" = 0 ]
check "the shield is in the Kubernetes mode" grep -q 'Kubernetes node' "$OUT/cs.out"
P1=$(pmqos); D1=$(default_aff)
check "the shield bounds 2-3's PM QoS to 10 µs ($P1)" [ "$P1" = "cpu0=0 cpu1=0 cpu2=10 cpu3=10 " ]
check "default_smp_affinity off 2-3 under the shield ($D1)" mask_off "$D1" 0xc
movable_left 2-3; check "no IRQ the kernel lets move is on 2-3 under the shield" [ $? = 0 ]
cp "$OUT/rt.yaml" "$M/"
wait_for "$WAIT" "the annotated pod's container rt running under the shield" running rt
sleep 6
P2=$(pmqos)
info "with the pod: pm_qos $P2; CRI-O's saved values: '$(saves)'; default_smp_affinity $(default_aff)"
check "CRI-O's hook holds 2-3's PM QoS at the pod's 20 ($P2)" [ "$P2" = "cpu0=0 cpu1=0 cpu2=20 cpu3=20 " ]
check "CRI-O saved the shield's 10 for 2-3 ('$(saves)')" [ "$(saves)" = "cpu2:10 cpu3:10 " ]
cs status
check "status exits 0 with the pod running: its PM QoS is the pod's" [ "$CS_RC" = 0 ]
check "status says CRI-O's hook holds CPU 2's PM QoS" grep -q "CPU 2: pm_qos_resume_latency_us reads 20, a pod's: CRI-O's hook holds it" "$OUT/cs.out"
check "the plugin changed nothing (no journal of its own)" [ ! -e /run/cpushield/nri.json ]
# The pod deleted: CRI-O's pre-stop hook sets 2-3 in default_smp_affinity
# again and has irqbalance place the IRQs once with none of 0-3 banned;
# the healer repairs that, with no person acting.
rm -f "$M/rt.yaml"
# status over and over from the manifest's removal until the container
# stopped and status holds: when it broke, and when it held again
T=$(cut -d' ' -f1 /proc/uptime); BROKE=""; HELD=""; STOPPED=""; LAST_BROKE=""; N_BROKE=0
while :; do
    /job/cpushield status >"$OUT/held.out" 2>&1; rc=$?
    now=$(cut -d' ' -f1 /proc/uptime); at=$(awk "BEGIN { printf \"%.1f\", $now - $T }")
    if [ $rc != 0 ] && [ -z "$BROKE" ]; then
        BROKE=$at; info "status broken at +$at s: $(grep -iE -m2 'broken|allowed|affinity' "$OUT/held.out" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
    fi
    [ $rc != 0 ] && { LAST_BROKE=$at; N_BROKE=$((N_BROKE + 1)); }
    [ $rc = 0 ] && [ -n "$BROKE" ] && [ -z "$HELD" ] && HELD=$at
    [ -z "$STOPPED" ] && ! crictl ps --state running --name '^rt$' -q | grep -q . && STOPPED=$at
    [ -n "$STOPPED" ] && [ $rc = 0 ] && [ -n "$HELD" ] && break
    [ -n "$STOPPED" ] && [ $rc = 0 ] && [ -z "$BROKE" ] && [ "${at%.*}" -ge $(( ${STOPPED%.*} + 10 )) ] && break
    [ "${at%.*}" -ge 180 ] && break
    sleep 0.2
done
info "after the manifest's removal: the container stopped at +$STOPPED s; status broken first at +${BROKE:-never} s, holding again at +${HELD:-never} s; broken in $N_BROKE status runs, the last at +${LAST_BROKE:-never} s (exit $rc at the end)"
info "what CRI-O ran of irqbalance, in all: $(tr '\n' '|' </run/crio-irqbalance.log 2>/dev/null)"
check "status holds again after the pod's stop, with no person acting (the healer's repair)" [ "$rc" = 0 ]
check "the healer counted the repair (reason drift)" heal_counted drift
info "the healer's state: $(tr -d '\n' </run/cpushield/heal.json 2>/dev/null | cut -c1-300)"
D3=$(default_aff); P3=$(pmqos)
check "default_smp_affinity off 2-3 again ($D3)" mask_off "$D3" 0xc
check "2-3's PM QoS the shield's 10 again: CRI-O wrote back what it saved ($P3)" [ "$P3" = "cpu0=0 cpu1=0 cpu2=10 cpu3=10 " ]
movable_left 2-3; check "no IRQ the kernel lets move is on 2-3 after the repair" [ $? = 0 ]
note "k8s crio node: shield beside CRI-O: the annotated pod's stop broke status at +${BROKE:-never} s after its manifest's removal, held again at +${HELD:-never} s, broken in $N_BROKE status runs, the last at +${LAST_BROKE:-never} s (container stopped +$STOPPED s; healer: $(sed -n 's/.*"drift": *\([0-9]*\).*/drift \1/p' /run/cpushield/heal.json), last repair $(sed -n 's/.*"took_ms": *\([0-9]*\).*/\1/p' /run/cpushield/heal.json) ms)"
# off while the pod runs: the pod's PM QoS is left to CRI-O, which gets
# the value from before the shield to write back at the pod's stop.
cp "$OUT/rt.yaml" "$M/"
wait_for "$WAIT" "the annotated pod's container rt running again" running rt
sleep 6
check "the pod's PM QoS 20 again, CRI-O saved the shield's 10 ($(pmqos); '$(saves)')" [ "$(pmqos)/$(saves)" = "cpu0=0 cpu1=0 cpu2=20 cpu3=20 /cpu2:10 cpu3:10 " ]
cs off
check "off exits 0 with the pod running" [ "$CS_RC" = 0 ]
check "off says 2-3's PM QoS is left to CRI-O's hook" grep -q "held by CRI-O's high-performance hook" "$OUT/cs.out"
P4=$(pmqos)
check "2-3's PM QoS still the pod's 20 after off ($P4)" [ "$P4" = "cpu0=0 cpu1=0 cpu2=20 cpu3=20 " ]
check "CRI-O's saved values now the ones from before the shield ('$(saves)')" [ "$(saves)" = "cpu2:0 cpu3:0 " ]
rm -f "$M/rt.yaml"
wait_for 180 "rt's container stopped" sh -c "! crictl ps --state running --name '^rt\$' -q | grep -q ."
sleep 2
P5=$(pmqos)
check "the pod gone: PM QoS as before the shield ($P0; $P5)" [ "$P5" = "$P0" ]
check "default_smp_affinity as before the shield ($D0; $(default_aff))" [ "$(default_aff)" = "$D0" ]
kill "$NRI" 2>/dev/null; wait "$NRI" 2>/dev/null
info "the plugin's log:"; sed 's/^/    nri| /' "$OUT/nri.log" | cut -c1-250
check "the plugin never wrote a journal" [ ! -e /run/cpushield/nri.json ]
snap s1
snap_equal_after_irqbalance s0 s1 "the node as before the shield once off and CRI-O's stop hook are both done" kubelet
journalctl -b -u crio -o short-monotonic --no-pager >"$OUT/crio.journal.shield" 2>&1
[ "$FAILS" = 0 ] || { info "kubelet's journal, last lines:"; tail -n 40 "$OUT/kubelet.journal" | cut -c1-300 | sed 's/^/    /'; }
result
