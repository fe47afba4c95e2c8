//! Shielding: `snapshot → plan → journal → apply → verify → report`, and
//! `undo` as the journal replayed in reverse.
//!
//! A file per command (`on`, `off`, `status`, `move_run`) with its report
//! type; the pipeline they share (`snapshot`, `plan`, `journal`, `apply`,
//! `reshape`); and a module per component the shield drives (`mechanism`,
//! `irqbalance`, `irqs`, `tasks`, `knobs`, `hotplug`). Touches the kernel only through
//! [`crate::sys::Sys`]; its runtime state lives in the journal under
//! `run/cpushield` of the same root.

pub mod apply;
pub mod change;
mod components;
mod error;
mod guard;
mod holds;
mod hotplug;
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
pub mod reshape;
pub mod rt_kthreads;
mod tasks;
mod timings;
mod workqueues;

pub use components::report::OnReport;
pub use components::status::{status, StatusReport};
pub use components::{owners, snapshot};
pub(crate) use error::require_root;
pub use error::ShieldError;
pub use guard::{unprotected_kernel_work, Hold as GuardHold};
pub use irqs::IrqPlacement;
pub use irqs::IrqRefusal;
pub use move_run::{enter_shield, move_tasks, run_target, MoveReport, RunPolicy};
pub use note::{Note, Unreadable, UnreadableFile};
pub use off::{off, off_plan, off_timed, OffReport};
pub use on::{on, on_timed};
pub use tasks::{Direction, TaskRef};
pub use timings::Timings;
