//! Shielding: `snapshot → plan → journal → apply → settle → report`, and
//! `undo` as the journal replayed in reverse.
//!
//! The folder shows the layout: the flows of the commands at the top
//! (`on`, `off`; `move` and `run` are the tasks component's own); `engine/`, which names no component (the
//! vocabulary of changes, the `Component` trait, the plan, the journal,
//! apply and undo, the change in place); and `components/`, one file (or
//! folder) per component the shield drives, each implementing `Component`
//! and the capabilities it has, beside
//! their composition in `components/mod.rs` (the order table `ORDER`, the
//! only registry) and its siblings (the snapshot, the settling after apply,
//! `on`'s report and `status`). Touches the kernel only through
//! [`crate::sys::Sys`]; its runtime state lives in the journal under
//! `run/cpushield` of the same root.

pub mod components;
mod engine;
mod off;
mod on;

pub use engine::{
    apply, cgroup_layout, change, facts, journal, kept, options, owners, plan, reach,
};
use engine::{component, error, holds, note, parts, plan_error, timings};
pub use engine::{report, request, reshape, screen, snapshot, undo};

pub use change::TaskRef;
pub use component::Audited;
pub use components::status::{status, StatusReport};
pub use components::{enter_shield, move_tasks, run_target, MoveReport, RunPolicy};
pub use components::{heal_drift, irqbalance_own_ban};
pub use components::{named_sets, task_table, Direction, Place};
pub use components::{plan_line, realtime_below, tuned_overlap, Options};
pub use components::{unprotected_kernel_work, TuneList, GUARD_BOOSTS};
pub use engine::report::OnReport;
pub(crate) use error::require_root;
pub use error::ShieldError;
pub use kept::KeptRealtime;
pub use note::{Note, OwnNote, PartNote};
pub use off::{off, off_plan, off_timed, OffReport};
pub use on::{on, on_timed, repair};
pub use parts::{Line, MachineWide, Metric, OwnFacts, PartReport};
pub use timings::Timings;
