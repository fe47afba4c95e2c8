//! What irqbalance's part of the shield tells the user, worded here.

use super::*;
use crate::shield::note::OwnNote;

/// irqbalance's own notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IrqbalanceNote {
    /// irqbalance runs without a systemd unit: cpushield cannot ban CPUs
    /// for it, and it moves IRQs back onto the shield.
    IrqbalanceWithoutUnit {
        /// Its process.
        pid: i32,
        /// The shielded CPUs it moves IRQs back onto.
        shield: CpuSet,
        /// The ban it needs: the shield and what it bans by itself.
        ban: CpuSet,
    },
    /// irqbalance runs outside its systemd unit: the ban reaches it only
    /// when it is restarted as the unit.
    IrqbalanceOutsideUnit {
        /// The cgroup it runs in, when known.
        cgroup: Option<String>,
    },
    /// The user's own irqbalance ban is kept in cpushield's.
    IrqbalanceOwnBanKept {
        /// The user's file that sets it, with the line.
        setting: String,
        /// The CPUs cpushield bans while shielded.
        banned: CpuSet,
    },
}

impl OwnNote for IrqbalanceNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        match self {
            IrqbalanceNote::IrqbalanceWithoutUnit { pid, shield, ban } => format!(
                "irqbalance (pid {pid}) runs without a systemd unit: cpushield cannot ban CPUs for it, and it moves IRQs back onto CPUs {shield} within seconds; restart it with IRQBALANCE_BANNED_CPULIST={ban} in its environment, or stop it"
            ),
            IrqbalanceNote::IrqbalanceOutsideUnit { cgroup } => format!(
                "irqbalance runs outside its unit ({}): the ban reaches it only if it is restarted as {IRQBALANCE_UNIT}",
                crate::escape::terminal(cgroup.as_deref().unwrap_or("?"))
            ),
            IrqbalanceNote::IrqbalanceOwnBanKept { setting, banned } => format!(
                "irqbalance's own ban ({setting}) is kept: cpushield bans CPUs {banned} while shielded"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn each_note_is_worded_and_carried_with_its_kind_and_fields() {
        let note = IrqbalanceNote::IrqbalanceWithoutUnit {
            pid: 400,
            shield: cpus("2-3"),
            ban: cpus("2-3,5"),
        };
        assert_eq!(
            crate::report::note::text(&note.note()),
            "irqbalance (pid 400) runs without a systemd unit: cpushield cannot ban CPUs for it, and it moves IRQs back onto CPUs 2-3 within seconds; restart it with IRQBALANCE_BANNED_CPULIST=2-3,5 in its environment, or stop it"
        );
        let json = serde_json::to_value(note.note()).unwrap();
        assert_eq!(json["kind"], "irqbalance_without_unit");
        assert_eq!(json["component"], "irqbalance");
        assert_eq!(json["pid"], 400);
        assert_eq!(json["ban"], "2-3,5");
        let back: Note = serde_json::from_value(json).unwrap();
        assert_eq!(back, note.note());
        assert_eq!(
            IrqbalanceNote::IrqbalanceOutsideUnit { cgroup: None }.text(),
            "irqbalance runs outside its unit (?): the ban reaches it only if it is restarted as irqbalance.service"
        );
    }
}
