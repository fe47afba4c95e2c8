//! resctrl's own changes, made and undone: the mount, a group's share
//! written from `info/` and read back, the share written back, the mount
//! left where others came to use it; and how the plan prints a share.

use super::*;

/// What a resctrl `schemata` write gives its group.
pub(super) fn cache_share(share: &CacheShare) -> String {
    let ids = |d: &[u32]| d.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    match share {
        CacheShare::Top { ways, domains } => format!(
            "{ways} L3 ways of cache {} (at the top, or at the bottom where the top holds more \
             of the ways I/O also fills)",
            ids(domains)
        ),
        CacheShare::Rest {
            ways,
            domains,
            bandwidth,
        } => format!(
            "the L3 ways of cache {} but the shield's {ways}{}",
            ids(domains),
            bandwidth
                .map(|b| match b {
                    Bandwidth::Percent(p) =>
                        format!(", {p}% of the memory bandwidth (rounded up to the granularity)"),
                    Bandwidth::Rate(_) => format!(", {b} of memory bandwidth"),
                })
                .unwrap_or_default()
        ),
        CacheShare::Full => "every L3 way and all the memory bandwidth".into(),
        CacheShare::Text { schemata } => format!("{:?}", schemata.trim()),
    }
}

/// Mounts resctrl.
pub fn mount(sys: &Sys, target: &str) -> Result<(), ApplyError> {
    sys.mount_resctrl(target).map_err(ApplyError::from)
}

/// Writes a share to a group's `schemata`, made from `info/` now, and
/// reads it back. A refusal carries the kernel's reason from
/// `info/last_cmd_status`.
pub fn write_share(sys: &Sys, path: &str, share: &CacheShare) -> Result<(), ApplyError> {
    let info = kernel::read_info(sys, RESCTRL)?;
    let online = sys.read_cpulist("sys/devices/system/cpu/online")?;
    let all: BTreeSet<u32> = online
        .iter()
        .filter_map(|c| kernel::l3_domain(sys, c))
        .collect();
    let value = share.schemata(&info, &all.into_iter().collect::<Vec<_>>());
    if let Err(mut e) = sys.write(path, &format!("{value}\n")) {
        if let Ok(why) = sys.read_trimmed(&format!("{RESCTRL}/info/last_cmd_status")) {
            e.target = format!("{} (resctrl: {why})", e.target);
        }
        return Err(e.into());
    }
    let read = sys.read_trimmed(path)?;
    match kernel::schemata_holds(&read, &value) {
        true => Ok(()),
        false => Err(ApplyError::NotHonoured {
            path: format!("/{path}"),
            wrote: value,
            read,
        }),
    }
}

/// The `schemata` read just before a share is written, for its undo.
pub fn previous(sys: &Sys, path: &str) -> Option<String> {
    sys.read_trimmed(path).ok()
}

/// Undoes a share: the `schemata` read before written back (nothing when
/// the group is gone, which gave its ways back with it).
pub fn undo_share(sys: &Sys, path: &str, previous: Option<&str>, out: &mut Undone) {
    let Some(previous) = previous else { return };
    if !sys.exists(path) {
        out.unchanged += 1;
        return;
    }
    let lines: Vec<&str> = previous
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let value = lines.join("\n");
    if sys
        .read_trimmed(path)
        .is_ok_and(|now| kernel::schemata_holds(&now, &value))
    {
        out.unchanged += 1;
        return;
    }
    let written = sys.write(path, &format!("{value}\n"));
    match written.map(|()| sys.read_trimmed(path)) {
        Ok(Ok(now)) if kernel::schemata_holds(&now, &value) => out.restored += 1,
        Ok(now) => out.failed.push(Refusal {
            target: format!("/{path}"),
            reason: format!(
                "wrote the schemata back but it reads {}",
                now.unwrap_or_default().replace('\n', "; ")
            ),
        }),
        Err(e) => out.failed.push(Refusal {
            target: format!("/{path}"),
            reason: format!("could not write the schemata back: {}", e.errno_name()),
        }),
    }
}

/// Unmounts resctrl mounted by the shield, as the engine unmounts a
/// cgroup2 of its own (while it is the one mount there, nothing below
/// it), unless other programs made groups in it since: unmounting would
/// destroy them, so it is left mounted, and said.
pub fn unmount(sys: &Sys, target: &str, out: &mut Undone) {
    let theirs: Vec<String> = (groups(sys, mounted(sys)).into_iter())
        .filter(|g| g != GROUP)
        .collect();
    if let Some(first) = theirs.first() {
        out.left_in_use.push(Refusal {
            target: format!("/{target}"),
            reason: format!(
                "left mounted: other programs made resctrl groups in it since ({}{}), \
                 which unmounting would destroy",
                report::group_name(first),
                if theirs.len() > 1 { " and more" } else { "" }
            ),
        });
        return;
    }
    crate::shield::undo::unmount_own(sys, (target, "resctrl"), false, out);
}

/// Sets a group's `mode` and reads it back; a refusal carries the
/// kernel's reason (`Schemata overlaps`).
pub(super) fn set_mode(sys: &Sys, path: &str, mode: &str) -> Result<(), ApplyError> {
    if let Err(mut e) = sys.write(path, mode) {
        if let Ok(why) = sys.read_trimmed(&format!("{RESCTRL}/info/last_cmd_status")) {
            e.target = format!("{} (resctrl: {why})", e.target);
        }
        return Err(e.into());
    }
    let read = sys.read_trimmed(path)?;
    match read == mode {
        true => Ok(()),
        false => Err(ApplyError::NotHonoured {
            path: format!("/{path}"),
            wrote: mode.into(),
            read,
        }),
    }
}

/// Undoes a mode: the mode read before written back (nothing when the
/// group is gone).
pub(super) fn undo_mode(sys: &Sys, path: &str, previous: Option<&str>, out: &mut Undone) {
    let Some(previous) = previous.map(str::trim) else {
        return;
    };
    match sys.read_trimmed(path) {
        Err(_) => out.unchanged += 1,
        Ok(now) if now == previous => out.unchanged += 1,
        Ok(_) => match set_mode(sys, path, previous) {
            Ok(()) => out.restored += 1,
            Err(e) => out.failed.push(Refusal {
                target: format!("/{path}"),
                reason: format!("could not write the mode {previous:?} back: {e}"),
            }),
        },
    }
}
