//! A journal's records screened before `off` acts on them: each must name
//! only what a shield changes ([`super::reach::Bounds`]), a component's
//! own action judged by its component through [`Effects`].

use super::apply::{describe, Effects};
use super::change::Action;
use super::journal::{Entry, State};
use super::reach::{shown, Bounds};
use crate::input::brief_to;
use crate::sys::Sys;

/// What undo would do with `action`, briefly, for a refusal.
fn what(fx: &dyn Effects, action: &Action) -> String {
    match action {
        Action::Write { path, .. } => format!("write /{path}"),
        Action::Mkdir { path } => format!("remove the directory /{path}"),
        Action::MountCgroup2 { target, .. } => format!("unmount /{target}"),
        Action::MoveTask { tid, back, .. } => format!("move task {tid} back to /{back}"),
        Action::Systemd {
            undo: Some(undo), ..
        } => shown(undo),
        other => describe(fx, other),
    }
}

/// The records of `entries` a shield may act on, and for each other its
/// index and why not (naming what the record would have changed).
pub fn screen(
    sys: &Sys,
    fx: &dyn Effects,
    state: Option<&State>,
    entries: Vec<Entry>,
) -> (Vec<Entry>, Vec<(usize, String)>) {
    let bounds = Bounds::new(sys, fx.reach(), state);
    let mut kept = Vec::with_capacity(entries.len());
    let mut refused = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        match bounds.entry(&|a, b| fx.within(a, b), &entry) {
            Ok(()) => kept.push(entry),
            Err(why) => refused.push((
                i,
                format!(
                    "{}: {why}; outside what a shield changes, not acted on",
                    brief_to(&what(fx, &entry.action), 120)
                ),
            )),
        }
    }
    (kept, refused)
}
