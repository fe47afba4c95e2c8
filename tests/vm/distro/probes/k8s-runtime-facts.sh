#!/bin/sh
# summary: the Kubernetes node's container runtime as the NRI plugin meets
#   it (facts, for comparing trixie-k8s's containerd 1.7 with trixie-k8s2's
#   containerd 2.x): versions; containerd's unit and the NRI and CRI
#   settings it runs with (config dump); the sandbox image and the images
#   imported (pinned or not); the plugin's "configured by" line and what
#   it logged of registrations, synchronisations and ended connections
#   (the plugin is started here if no scenario before ran it in this
#   boot); containerd's NRI log lines; the containers' transient units and
#   the shims' cgroup; the node's units' start times. Run after 21-k8s-nri
#   in the same boot for that scenario's plugin log:
#   run.sh --suite trixie-k8s2 21-k8s-nri k8s-runtime-facts
# distro: suites=trixie-k8s,trixie-k8s2 time=300
# skip-why: needs a Kubernetes node image on containerd (trixie-k8s or trixie-k8s2)
. /job/lib.sh "$1"
. /job/k8s.sh
wait_for "$WAIT" "kubelet healthz ok" healthz
check "containerd is active" systemctl is-active --quiet containerd
note "k8s runtime: $(containerd --version 2>&1 | awk '{print $1, $3}'), $(runc --version 2>&1 | head -n1), $(kubelet --version 2>&1)"
info "ctr version: $(ctr version 2>&1 | tr -s ' \n' ' ')"
info "crictl version: $(crictl version 2>&1 | tr -s ' \n' ' ')"
systemctl cat containerd 2>&1 | grep -v '^#' | grep . | sed 's/^/    unit| /'
containerd config dump >"$OUT/config.dump" 2>&1
info "containerd's configuration (config dump): $(head -n1 "$OUT/config.dump")"
awk '/io\.containerd\.nri\.v1\.nri/ {p = 1} p && /^ *$/ {exit} p' "$OUT/config.dump" | sed 's/^/    nri| /'
grep -E "sandbox_image|sandbox = |SystemdCgroup|snapshotter = '|snapshotter = \"" "$OUT/config.dump" | sed 's/^/    cri| /'
check "NRI's socket exists" [ -S /var/run/nri/nri.sock ]
info "k8s-images.service: $(journalctl -b -u k8s-images -o cat --no-pager 2>&1 | tr '\n' '|' | cut -c1-600)"
ctr -n k8s.io images ls 2>&1 | sed 's/^/    ctr-images| /'
crictl images -v 2>&1 | grep -E '^(ID|RepoTags|Pinned)' | sed 's/^/    crictl-images| /'
crictl info 2>&1 | grep -iE '"sandboxImage"|"pinnedImages"|"sandbox"|"systemdCgroup"|"enableNRI"|"nri"' | head -n 12 | sed 's/^/    crictl-info| /'
plog() { journalctl -b -u cpushield-nri -u cpushield-nri-facts -o cat --no-pager 2>/dev/null; }
if ! plog | grep -q 'registered as'; then
    systemctl reset-failed cpushield-nri-facts 2>/dev/null
    systemd-run --quiet --unit=cpushield-nri-facts -p Restart=no /job/cpushield nri
    wait_for 30 "the plugin (started here) registered" sh -c "journalctl -b -u cpushield-nri-facts -o cat --no-pager | grep -q 'registered as'"
    systemctl stop cpushield-nri-facts
fi
plog | grep -E 'configured by|registered as|synchronised|connection ended|no runtime|shutting down|does not decode|not implemented' | sed 's/^/    plugin| /'
c=$(plog | grep -m1 -o 'configured by .*')
note "k8s runtime: the NRI plugin was $c"
check "the plugin was configured by containerd" sh -c "plog() { journalctl -b -u cpushield-nri -u cpushield-nri-facts -o cat --no-pager; }; plog | grep -q 'configured by containerd'"
journalctl -b -u containerd -o cat --no-pager >"$OUT/containerd.journal" 2>&1
info "containerd's journal: $(wc -l <"$OUT/containerd.journal") lines, $(grep -ci nri "$OUT/containerd.journal") about NRI, $(grep -c 'level=error' "$OUT/containerd.journal") at level error"
grep -i nri "$OUT/containerd.journal" | sed 's/^time="[^"]*" //' | sort | uniq -c | sort -rn | head -n 25 | sed 's/^/    containerd-nri| /'
grep 'level=error' "$OUT/containerd.journal" | sed 's/^time="[^"]*" //' | cut -c1-240 | sort | uniq -c | sort -rn | head -n 12 | sed 's/^/    containerd-error| /'
info "containerd's own starts this boot: $(grep -c 'containerd successfully booted' "$OUT/containerd.journal")"
journalctl -b _PID=1 -o cat --no-pager 2>/dev/null | grep -oE '(cri-containerd|containerd)-[^ ]*\.scope' | sed 's/[0-9a-f]\{64\}/<id>/' | sort | uniq -c | sed 's/^/    transient-units| /'
for p in $(pgrep -f containerd-shim-runc-v2); do
    info "shim $p: comm $(cat /proc/$p/comm), cgroup $(sed -n 's/^0:://p' /proc/$p/cgroup)"
done
systemd-analyze blame --no-pager 2>&1 | grep -E 'containerd|k8s-images|kubelet|tuned' | sed 's/^/    blame| /'
result
