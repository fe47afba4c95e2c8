//! cpushield: shielded CPUs for real-time work on stock Linux.
//!
//! Two flows run through the crate:
//! - shielding: `snapshot → plan → journal → apply → verify → report`
//!   ([`shield`]), with every kernel access going through [`sys`];
//! - measuring: `configure → isolate self → warm up → loop → aggregate →
//!   report` ([`measure`]).

#![deny(unsafe_code)]

pub mod audit;
pub mod boot;
pub mod certify;
pub mod compare;
pub mod config;
pub mod cpulist;
pub mod crio;
pub mod durable;
pub mod escape;
pub mod exit;
pub mod finding;
pub mod fleet;
pub mod guard;
pub mod heal;
pub mod input;
pub mod json_null;
pub mod kubelet;
pub mod load;
pub mod measure;
pub mod nri;
pub mod report;
pub mod run_user;
pub mod shield;
pub mod sys;

pub use cpulist::CpuSet;
