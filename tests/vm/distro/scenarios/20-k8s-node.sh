#!/bin/sh
# summary: the Kubernetes node (issue #60): on Debian 13 with containerd
#   1.7 or 2.x (CRI, systemd cgroup driver, NRI on) and kubelet standalone (static
#   pods, static CPU manager, reservedSystemCPUs 0-1), kubelet is active
#   and healthy; a Guaranteed static pod (requests = limits, cpu "2") gets
#   CPUs 2-3 for itself (cpu_manager_state, its cgroup's effective CPUs and
#   its own Cpus_allowed_list); a BestEffort pod runs on the shared pool
#   0-1; before any shield kubelet and containerd themselves may run on
#   2-3. cpushield: status and audit read-only (audit judging the CPUs
#   against kubelet's settings); `on 1-3` refused, naming 2-3; `on 2-3`
#   in the Kubernetes mode: system.slice, user.slice and init.scope read
#   0-1 effective, kubelet and containerd allowed 0-1, no cgroup of
#   cpushield's own, the pods' cgroups, processes and cpu_manager_state
#   unchanged, no thread outside the pods on 2-3 but per-CPU kthreads,
#   status exit 0, a pod created under the shield runs on the shared
#   pool; `off` gives each unit back its effective CPUs and systemd's
#   AllowedCPUs= exactly.
#   Recorded: kubelet's, containerd's, runc's and crictl's versions, and
#   whether NRI's socket exists.
# distro: suites=trixie-k8s,trixie-k8s2 time=900
# skip-why: needs the Kubernetes node image (run.sh --suite trixie-k8s 20, or trixie-k8s2: containerd 2.x)
# Settings: K8S_WAIT (seconds to wait for kubelet and each pod, default 300).
. /job/lib.sh "$1"
. /job/k8s.sh

# 0. What the node is.
info "kernel $(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup), $(nproc) CPUs online ($(cat /sys/devices/system/cpu/online))"
info "kubelet: $(kubelet --version 2>&1)"
info "containerd: $(containerd --version 2>&1)"
info "runc: $(runc --version 2>&1 | head -n1)"
info "crictl: $(crictl --version 2>&1)"
info "images built by the test bed: $(tr '\n' ';' </var/lib/cpushield-k8s/versions.txt)"
note "k8s node: $(kubelet --version 2>&1), $(containerd --version 2>&1 | awk '{print $1, $3}'), $(runc --version 2>&1 | head -n1)"
# the boot: kubelet and containerd start before multi-user.target
for u in containerd k8s-images kubelet multi-user.target; do
    info "$u active $(systemctl show -p ActiveEnterTimestampMonotonic --value $u | awk '{printf "%.1f s", $1 / 1e6}') after boot"
done
info "this job started $(systemctl show -p ExecMainStartTimestampMonotonic --value cpushield-job | awk '{printf "%.1f s", $1 / 1e6}') after boot"
info "slowest units: $(systemd-analyze blame --no-pager 2>/dev/null | head -n 6 | awk '{$1=$1; print}' | tr '\n' ';')"
check "containerd is active" systemctl is-active --quiet containerd
check "the OCI images were imported (k8s-images.service)" systemctl is-active --quiet k8s-images
info "images in containerd (k8s.io): $(ctr -n k8s.io images ls -q 2>&1 | tr '\n' ' ')"
wait_for "$WAIT" "kubelet healthz ok" healthz
check "kubelet is active" systemctl is-active --quiet kubelet
check "kubelet's healthz says ok" healthz
info "kubelet's start in the journal: $(journalctl -b -u kubelet -o cat --no-pager 2>/dev/null | grep -m3 -i 'cpu manager\|cpu_manager\|static policy' | cut -c1-200 | tr '\n' '|')"
if [ -S /var/run/nri/nri.sock ]; then
    info "NRI socket /var/run/nri/nri.sock: present"; note "k8s node: containerd's NRI on (config): /var/run/nri/nri.sock exists"
else
    info "NRI socket /var/run/nri/nri.sock: absent"; note "k8s node: NRI switched on in containerd's config, yet no /var/run/nri/nri.sock"
fi
check "NRI's socket exists (NRI switched on in containerd's config)" [ -S /var/run/nri/nri.sock ]
crictl info >"$OUT/crictl-info.json" 2>&1 || true
info "CRI: $(grep -o '"SystemdCgroup": *[a-z]*\|"sandboxImage": *"[^"]*"\|"NetworkReady"[^}]*' "$OUT/crictl-info.json" | tr '\n' ' ')"
check "CRI uses the systemd cgroup driver (crictl info)" grep -q '"SystemdCgroup": *true' "$OUT/crictl-info.json"
check "cpu_manager_state says policy static" [ "$(manager_state "j['policyName']")" = static ]
info "cpu_manager_state before any pod: $(cat "$STATE")"

# 1. The pods: one Guaranteed (2 whole CPUs), one BestEffort. Host network:
# no CNI on this node, and pods on the host network need none.
pod_manifest rt-guaranteed rt --cpus 2 --memory 32Mi >"$OUT/rt.yaml"
pod_manifest be-shared be >"$OUT/be.yaml"
cp "$OUT/rt.yaml" "$OUT/be.yaml" "$M/"
wait_for "$WAIT" "the Guaranteed pod's container rt running" running rt
wait_for "$WAIT" "the BestEffort pod's container be running" running be
check "the Guaranteed pod's container runs" running rt
check "the BestEffort pod's container runs" running be
crictl pods >"$OUT/pods.txt" 2>&1; crictl ps -a >"$OUT/containers.txt" 2>&1
sed 's/^/    | /' "$OUT/pods.txt" "$OUT/containers.txt"
# the CPU manager writes its state at admission; its reconcile loop (5 s
# here) writes the cgroups
sleep 6
info "cpu_manager_state: $(cat "$STATE")"
cp "$STATE" "$OUT/cpu_manager_state"
RT_UID=$(crictl inspectp -o go-template --template '{{.status.metadata.uid}}' "$(crictl pods --name rt-guaranteed -q | head -n1)" 2>/dev/null)
info "the Guaranteed pod's uid: $RT_UID"
check "cpu_manager_state gives container rt CPUs 2-3" [ "$(manager_state "j['entries']['$RT_UID']['rt']")" = 2-3 ]
check "cpu_manager_state's shared pool (defaultCpuSet) is 0-1" [ "$(manager_state "j['defaultCpuSet']")" = 0-1 ]
check "cpu_manager_state has no entry for the BestEffort container" \
    [ "$(manager_state "sum(1 for p in j.get('entries', {}).values() for c in p if c == 'be')")" = 0 ]

# 2. The cgroups the kernel enforces.
RT=$(cid rt); BE=$(cid be)
RT_CG=$(cgroup_of "$RT"); BE_CG=$(cgroup_of "$BE")
info "rt's cgroup: $RT_CG"
info "be's cgroup: $BE_CG"
check "rt's cgroup is under kubepods.slice (systemd driver)" sh -c "echo '$RT_CG' | grep -q '^/sys/fs/cgroup/kubepods.slice/kubepods-pod.*\.slice/cri-containerd-.*\.scope$'"
check "be's cgroup is under kubepods-besteffort.slice" sh -c "echo '$BE_CG' | grep -q '^/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/'"
pods_on_their_cpus
for d in /sys/fs/cgroup/kubepods.slice /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice; do
    info "${d#/sys/fs/cgroup/}: cpuset.cpus '$(cat "$d/cpuset.cpus" 2>/dev/null)' effective '$(cat "$d/cpuset.cpus.effective" 2>/dev/null)' partition '$(cat "$d/cpuset.cpus.partition" 2>/dev/null)'"
done

# 3. The rest of the machine: nothing keeps it off the exclusive CPUs today.
info "root cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
for u in system.slice user.slice init.scope; do
    d=/sys/fs/cgroup/$u
    [ -d "$d" ] || { info "$u: no cgroup"; continue; }
    info "$u: cpuset.cpus '$(cat "$d/cpuset.cpus" 2>/dev/null)' effective '$(cat "$d/cpuset.cpus.effective" 2>/dev/null)'; $(systemctl show -p AllowedCPUs -p EffectiveCPUs -- "$u" | tr '\n' ' ')"
done
SYS_EFF=$(cat /sys/fs/cgroup/system.slice/cpuset.cpus.effective 2>/dev/null)
note "k8s node: system.slice cpuset.cpus.effective '$SYS_EFF' with a Guaranteed pod on 2-3 (kubelet confines only pods)"
KPID=$(systemctl show -p MainPID --value kubelet); CPID=$(systemctl show -p MainPID --value containerd)
K_ALLOWED=$(allowed "$KPID")
C_ALLOWED=$(allowed "$CPID")
info "kubelet (pid $KPID) allowed $K_ALLOWED in $(sed -n 's/^0:://p' "/proc/$KPID/cgroup"); containerd (pid $CPID) allowed $C_ALLOWED"
check "kubelet itself may run on the exclusive CPUs 2-3 (KUBERNETES.md: reservedSystemCPUs keeps only pods off)" meets "$K_ALLOWED" 2-3
check "containerd may run on 2-3 as well" meets "$C_ALLOWED" 2-3
check "system.slice is not confined today ('$SYS_EFF' meets 2-3)" meets "${SYS_EFF:-0-3}" 2-3
thread_leaks 2-3 | grep -v ':/kubepods' >"$OUT/leaks" || true
info "threads outside kubepods.slice allowed on 2-3 (per-CPU kthreads not counted): $(wc -l <"$OUT/leaks"), most: $(awk '{print $2}' "$OUT/leaks" | sort | uniq -c | sort -rn | head -n 8 | awk '{printf "%s x%s, ", $2, $1}')"

# 4. cpushield: read-only commands, then the Kubernetes mode: on, status,
# a pod made under the shield, off (issue #60).
snap before
cs status
check "status with no shield exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
# audit reads kubelet's own settings (its --config file and its
# checkpoint): the reserved CPUs against the audited ones, the CPUs the
# Guaranteed pod holds, the policy options that are off
finding() { grep -A1 "\"id\": \"$1\"" "$OUT/cs.out" | grep -q "\"severity\": \"$2\""; }
cs audit --cpus 2-3 --json
info "audit --cpus 2-3 exited $CS_RC; kubelet's findings: $(grep -A2 '"id": "kubelet' "$OUT/cs.out" | sed -n 's/.*"reason": "\(.*\)",/\1/p' | tr '\n' '|')"
check "audit --cpus 2-3: kubelet's reservedSystemCPUs 0-1 are the housekeeping CPUs (kubelet.reserved ok)" finding kubelet.reserved ok
check "audit --cpus 2-3 names the Guaranteed pod's container holding 2-3 (kubelet.exclusive, from cpu_manager_state)" \
    sh -c "grep -A2 '\"id\": \"kubelet.exclusive\"' '$OUT/cs.out' | grep -q 'container rt: 2-3'"
check "audit --cpus 2-3: strict-cpu-reservation is off here, said (kubelet.strict-cpu-reservation warn)" finding kubelet.strict-cpu-reservation warn
cs audit --cpus 1-3 --json
check "audit --cpus 1-3: CPU 1 is one of kubelet's reserved CPUs (kubelet.reserved bad)" finding kubelet.reserved bad
# each OS unit: its effective CPUs and systemd's AllowedCPUs= (what off
# must give back); its cpuset.cpus file is printed apart: the kernel
# refuses an empty one to a cgroup with tasks (ENOSPC), so a unit that had
# none gets every possible CPU back instead, the same CPUs
units() {
    for u in system.slice user.slice init.scope; do
        echo "$u effective $(cat /sys/fs/cgroup/$u/cpuset.cpus.effective 2>/dev/null) $(systemctl show -p AllowedCPUs -- "$u")"
    done
}
cpus_files() { for u in system.slice user.slice init.scope; do printf "%s cpuset.cpus '%s'; " "$u" "$(cat /sys/fs/cgroup/$u/cpuset.cpus 2>/dev/null)"; done; }
units >"$OUT/units.before"
info "before on: $(cpus_files)"
# The Kubernetes mode (issue #60): the shielded CPUs are those kubelet does
# not reserve; the OS's units confined to the reserved ones, kubepods left
# to kubelet.
cs on 1-3 --dry-run
check "on 1-3 is refused: kubelet reserves 0-1, so the shield is 2-3, exit 2 ($CS_RC)" [ "$CS_RC" = 2 ]
check "the refusal names the CPUs to shield" sh -c "grep -q 'the shielded CPUs are CPUs 2-3' '$OUT/cs.out'"
cs on 2-3 --dry-run
check "on 2-3 --dry-run plans the Kubernetes mode, exit 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "the dry run names the Kubernetes mechanism" sh -c "grep -q 'Kubernetes node' '$OUT/cs.out'"
cs on 2-3
check "on 2-3 makes the shield kubelet's way, exit 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "on says kubelet shares the reserved CPUs with pods (strict-cpu-reservation off here)" \
    sh -c "grep -q \"strict-cpu-reservation is off\" '$OUT/cs.out'"
check "on takes no shielded CPU offline under the pods" sh -c "! grep -q 'taken offline and online again' '$OUT/cs.out'"
for u in system.slice user.slice init.scope; do
    e=$(cat /sys/fs/cgroup/$u/cpuset.cpus.effective 2>/dev/null)
    check "$u confined by the kernel: cpuset.cpus.effective '$e' is 0-1" [ "$e" = 0-1 ]
done
check "no cgroup of the shield's own (no cpushield.slice, no cpushield)" \
    sh -c "[ ! -e /sys/fs/cgroup/cpushield.slice ] && [ ! -e /sys/fs/cgroup/cpushield ]"
K_ALLOWED=$(allowed "$KPID")
C_ALLOWED=$(allowed "$CPID")
check "kubelet now runs on the reserved CPUs only ($K_ALLOWED)" [ "$K_ALLOWED" = 0-1 ]
check "containerd now runs on the reserved CPUs only ($C_ALLOWED)" [ "$C_ALLOWED" = 0-1 ]
check "rt's cgroup still reads 2-3 (kubepods untouched)" [ "$(cat "$RT_CG/cpuset.cpus.effective" 2>/dev/null)" = 2-3 ]
RT_ALLOWED=$(allowed "$(pid_of "$RT")")
check "rt's process still allowed 2-3 ($RT_ALLOWED)" [ "$RT_ALLOWED" = 2-3 ]
check "be's cgroup still the shared pool 0-1" [ "$(cat "$BE_CG/cpuset.cpus.effective" 2>/dev/null)" = 0-1 ]
check "cpu_manager_state unchanged by on" cmp -s "$STATE" "$OUT/cpu_manager_state"
check "default_smp_affinity off the shield" sh -c "[ \"\$(cat /proc/irq/default_smp_affinity)\" = 3 ] || [ \"\$(cat /proc/irq/default_smp_affinity)\" = 03 ]"
thread_leaks 2-3 | grep -v ':/kubepods' >"$OUT/leaks.on" || true
info "threads outside kubepods.slice allowed on 2-3 under the shield: $(wc -l <"$OUT/leaks.on"): $(awk '{print $2}' "$OUT/leaks.on" | sort | uniq -c | sort -rn | head -n 8 | awk '{printf "%s x%s, ", $2, $1}')"
check "no thread outside the pods is left on 2-3 but per-CPU kernel threads" [ ! -s "$OUT/leaks.on" ]
check "kubelet still active and healthy under the shield" healthz
cs status
check "status under the Kubernetes-mode shield exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "status lists the pods' tasks apart, as kubelet's" sh -c "grep -q \"tasks of kubelet's pods\" '$OUT/cs.out'"
check "status gives kubelet's strict-cpu-reservation off as advice" sh -c "grep -q 'advice (kubelet): kubelet.s strict-cpu-reservation is off' '$OUT/cs.out'"
echo 'cpus = "2-3"' >"$OUT/cs.toml"
/job/cpushield verify --config "$OUT/cs.toml" >"$OUT/verify.out" 2>&1; rc=$?
check "verify against cpus = 2-3 exits 0: the shield holds and matches ($rc)" [ $rc = 0 ]
/job/cpushield verify --config "$OUT/cs.toml" --nagios >"$OUT/nagios.out" 2>&1; rc=$?
info "verify --nagios: $(cut -c1-160 "$OUT/nagios.out")"
check "verify --nagios: WARNING (1) for the advice ($rc)" sh -c "[ $rc = 1 ] && grep -q '^CPUSHIELD WARNING - .*holds and matches.*strict-cpu-reservation' '$OUT/nagios.out'"
/job/cpushield verify --config "$OUT/cs.toml" --npd >/dev/null 2>&1; rc=$?
check "verify --npd: no problem (0) for advice alone ($rc)" [ $rc = 0 ]
# A pod created under the shield: kubelet and containerd still make pods.
sed 's/be-shared/be-later/; s/name: be$/name: be2/' "$OUT/be.yaml" >"$M/be2.yaml"
wait_for "$WAIT" "a BestEffort pod created under the shield runs" running be2
check "a pod created under the shield runs (pod creation not broken)" running be2
BE2_EFF=$(cat "$(cgroup_of "$(cid be2)")/cpuset.cpus.effective" 2>/dev/null)
check "its container is in the shared pool 0-1 ($BE2_EFF)" [ "$BE2_EFF" = 0-1 ]
rm -f "$M/be2.yaml"
cs off
check "off exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
units >"$OUT/units.after"
info "after off: $(cpus_files)"
sed 's/^/    before: /' "$OUT/units.before"; sed 's/^/    after:  /' "$OUT/units.after"
check "off gives each OS unit back its CPUs (effective) and systemd its AllowedCPUs= exactly" cmp -s "$OUT/units.before" "$OUT/units.after"
check "rt still on 2-3 after off" [ "$(cat "$RT_CG/cpuset.cpus.effective" 2>/dev/null)" = 2-3 ]
K_ALLOWED=$(allowed "$KPID")
check "kubelet may use every CPU again after off ($K_ALLOWED)" [ "$K_ALLOWED" = 0-3 ]
# on and off changed nothing for good of what a shield touches (pods,
# kubelet and containerd keep running: their threads come and go, their
# cgroups stay)
snap after
check "kubelet still active after on and off" systemctl is-active --quiet kubelet
check "rt still running with 2-3" [ "$(cat "$RT_CG/cpuset.cpus.effective" 2>/dev/null)" = 2-3 ]
check "cpu_manager_state unchanged" cmp -s "$STATE" "$OUT/cpu_manager_state"
snap_equal_after_irqbalance before after "off gives the node back exactly (kubelet's and irqbalance's own doing apart)" kubelet

# 5. The pods go; kubelet takes them down.
rm -f "$M/rt.yaml" "$M/be.yaml"
wait_for 120 "both pods' containers gone" sh -c "! crictl ps -q --state running | grep -q ."
check "no container left running after the manifests were removed" sh -c "! crictl ps -q --state running | grep -q ."
journalctl -b -u kubelet -o short-monotonic --no-pager >"$OUT/kubelet.journal" 2>&1
journalctl -b -u containerd -o short-monotonic --no-pager >"$OUT/containerd.journal" 2>&1
[ "$FAILS" = 0 ] || { info "kubelet's journal, last lines:"; tail -n 40 "$OUT/kubelet.journal" | cut -c1-300 | sed 's/^/    /'; }
result
