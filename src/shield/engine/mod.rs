//! The engine of the shield, which names no component: the vocabulary of
//! changes (`change`), what a component is (`component`), the plan and its
//! refusals, the journal, apply and undo, the change in place (`reshape`),
//! what the user asked (`request`), what a journal record may name
//! (`reach`) and what the reports say of it (`note`, `timings`, `error`).

pub mod apply;
pub mod cgroup_layout;
pub mod change;
pub(in crate::shield) mod component;
mod entry;
pub(in crate::shield) mod error;
pub mod facts;
pub mod fold;
pub(in crate::shield) mod holds;
pub mod journal;
pub mod kept;
pub(in crate::shield) mod note;
pub mod options;
pub mod owners;
pub(in crate::shield) mod parts;
pub mod plan;
pub(in crate::shield) mod plan_error;
pub mod reach;
pub mod report;
pub mod request;
pub mod reshape;
pub mod screen;
mod segment;
pub mod snapshot;
pub(in crate::shield) mod timings;
pub mod undo;
