#!/bin/sh
# cpushield %postun, the .deb's postrm in RPM terms. Like install, erase
# leaves the running system alone; it only deletes what the package's own
# timer wrote. The %systemd_postun_with_restart macro would restart
# cpushield.service on an upgrade and reload systemd, so the package does
# not use it. /etc/cpushield/cpushield.toml is the administrator's file
# (the package ships none) and is kept.
#
# $1 is how many cpushield packages stay installed: 0 on an erase, 1 or
# more when an upgrade removed the old package (nothing to do then).
#
# RPM has no purge, so the boot half stays (see %preun, which kept a copy
# of the binary to take it out by hand and said how); %postun does not run
# "boot --remove" either: that would rewrite the boot loader's
# configuration, which an erase must not do.
set -e

# node_exporter's textfile directory on Debian, and in the upstream layout
# the RHEL/Fedora packages follow (packaging/cpushield-metrics.service).
PROM="/var/lib/prometheus/node-exporter/cpushield.prom /var/lib/node_exporter/textfile_collector/cpushield.prom"

if [ "$1" = 0 ]; then
    # Without the binary nothing refreshes the metrics any more; a stale
    # file would go on telling Prometheus the last state as if current.
    rm -f $PROM
    # A copy of the binary that an earlier erase kept in /var/lib/cpushield
    # goes once neither a shield nor a boot half needs it (%preun has just
    # kept a fresh one if either does). The directory's other files are
    # cpushield's records, which stay.
    if [ ! -d /run/cpushield/journal ] && [ ! -f /var/lib/cpushield/boot.json ]; then
        rm -f /var/lib/cpushield/cpushield-off
        rmdir /var/lib/cpushield 2>/dev/null || true
    fi
fi

exit 0
