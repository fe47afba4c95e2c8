//! What the knobs read before the shield changes anything: the files of
//! the knobs a request names, each read once, into the snapshot's facts.

use std::collections::BTreeMap;

use super::{
    held_by_journal, knob_files, resolve, sibling_of, FileState, Knob, TuneState, Value, OWNER,
};
use crate::cpulist::CpuSet;
use crate::shield::error::ShieldError;
use crate::shield::journal::{self, Journal};
use crate::shield::parts::OwnFacts;
use crate::shield::plan_error::PlanError;
use crate::shield::request::Request;
use crate::sys::{ErrorKind, Sys};

/// Reads the files of the knobs `req` asks for into `facts` (nothing when
/// it asks for none). Watchdog values an active shield holds off come from
/// its journal: they must not be read while off.
pub(super) fn read(sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
    let names = super::asked(req);
    if names.is_empty() {
        return Ok(());
    }
    let knobs = resolve(&names).map_err(PlanError::from)?;
    let entries = match Journal::exists(sys) {
        true => journal::read_entries(sys)?,
        false => Vec::new(),
    };
    let known = held_by_journal(entries.iter().map(|e| &e.action))
        .into_iter()
        .map(|(path, (_, original))| (path, original))
        .collect();
    facts.put(OWNER.name(), &read_files(sys, &knobs, &req.cpus, &known));
    Ok(())
}

/// Reads the files of `knobs` for a shield of `shield`. Each file is read
/// exactly once; call this only before the knobs are changed. Files in
/// `known` are not read: their value is taken from there (the original
/// values of watchdogs an active shield holds off, from its journal).
pub(super) fn read_files(
    sys: &Sys,
    knobs: &[&Knob],
    shield: &CpuSet,
    known: &BTreeMap<String, String>,
) -> TuneState {
    let mut st = TuneState::default();
    for k in knobs {
        let files = knob_files(sys, k, shield);
        for f in &files {
            if let Some(v) = known.get(f) {
                st.files.insert(
                    f.clone(),
                    FileState::Present {
                        value: v.clone(),
                        writable: true,
                    },
                );
                continue;
            }
            let state = match sys.read_trimmed(f) {
                Ok(value) => FileState::Present {
                    value,
                    writable: sys.mode_allows_write(f),
                },
                Err(e) if e.kind == ErrorKind::NotFound => FileState::Missing,
                Err(e) => FileState::Unreadable {
                    reason: e.errno_name(),
                },
            };
            st.files.insert(f.clone(), state);
            if crate::crio::saved(sys, f).is_some() {
                st.held_by_crio.push(f.clone());
            }
        }
        // A knob whose value is another file's reads that one too.
        if let Value::Sibling(name) = k.value {
            for f in &files {
                let beside = sibling_of(f, name);
                if let Ok(value) = sys.read_trimmed(&beside) {
                    let writable = sys.mode_allows_write(&beside);
                    st.files
                        .insert(beside, FileState::Present { value, writable });
                }
            }
        }
        st.files_of.insert(k.name.to_string(), files);
    }
    st
}
