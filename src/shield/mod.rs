//! Shielding: `snapshot → plan → journal → apply → settle → report`, and
//! `undo` as the journal replayed in reverse.
//!
//! The flows of the commands (`on`, `off`, `move_run`); the engine they
//! share, which names no component (`change`, `plan`, `journal`, `apply`,
//! `reshape`); a module per component the shield drives (`mechanism`,
//! `irqbalance`, `irqs`, `tasks`, `workqueues`, `hotplug`, `guard`,
//! `rt_kthreads`, `knobs`); and `components`, where they are composed: the
//! order table, the snapshot, the settling after apply, `on`'s report and
//! `status`. Touches the kernel only through [`crate::sys::Sys`]; its
//! runtime state lives in the journal under `run/cpushield` of the same
//! root.

pub mod apply;
pub mod change;
mod component;
mod components;
mod error;
mod guard;
mod holds;
mod hotplug;
pub mod idle_states;
pub mod irqbalance;
pub mod irqs;
pub mod journal;
pub mod knobs;
mod mechanism;
mod move_run;
mod note;
mod off;
mod on;
pub mod plan;
mod plan_error;
pub mod request;
pub mod resctrl;
pub mod reshape;
pub mod rt_kthreads;
mod tasks;
mod timings;
pub mod undo;
mod workqueues;

pub use component::{OwnFacts, PartReport};
pub use components::report::OnReport;
pub use components::status::{status, StatusReport};
pub use components::{owners, plan_line, snapshot};
pub(crate) use error::require_root;
pub use error::ShieldError;
pub use guard::{unprotected_kernel_work, Hold as GuardHold};
pub use irqs::IrqPlacement;
pub use irqs::IrqRefusal;
pub use move_run::{enter_shield, move_tasks, run_target, MoveReport, RunPolicy};
pub use note::{Note, Unreadable, UnreadableFile};
pub use off::{off, off_plan, off_timed, OffReport};
pub use on::{on, on_timed};
pub use tasks::realtime::KeptRealtime;
pub use tasks::{Direction, TaskRef};
pub use timings::Timings;
