#!/bin/sh
# cpushield %post (packaging/build-rpm.sh puts it in the .rpm; the .deb's
# postinst does the same). Installing never changes the running system:
# nothing is enabled, started, restarted, or reloaded here. That is why the
# package does not use the %systemd_post macro's "systemctl preset", which
# may enable the units as a distribution's presets say, nor a daemon-reload,
# which would also apply unit-file changes other people have staged, and
# dissolves any cpuset partition systemd does not know about (seen on
# Debian 12 and 13). "systemctl enable" reloads by itself.
#
# $1 is how many cpushield packages are installed once this one is:
# 1 on a first install, 2 or more on an upgrade.
set -e

if [ "$1" = 1 ]; then
    cat <<'MSG'
cpushield: installed; nothing was started or changed.
  Shield CPUs at every boot:
    install -D -m 0644 /usr/share/doc/cpushield/examples/cpushield.toml /etc/cpushield/cpushield.toml
    (set cpus = ... there), then: systemctl enable --now cpushield.service
  Metrics for node_exporter: systemctl enable --now cpushield-metrics.timer
  containerd nodes (NRI on), per-pod CPU annotations: systemctl enable --now cpushield-nri.service
MSG
elif [ -d /run/systemd/system ]; then
    # Upgrade: the new unit files are read at the next daemon-reload or
    # boot. A running shield is left as it is.
    echo "cpushield: upgraded; the shield (if any) is unchanged. systemd reads the new unit files at its next daemon-reload."
fi

exit 0
