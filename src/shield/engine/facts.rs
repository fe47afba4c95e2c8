//! What one component needs of another, typed and owned by the engine:
//! the component that knows a fact publishes it in the plan, the ones that
//! need it read it by its type, and neither names the other.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::parts::OwnFacts;

/// A fact components share through the plan; its type is its key.
pub trait Fact: Serialize + DeserializeOwned {
    /// Its key among the plan's facts.
    const KEY: &'static str;
}

/// The IRQs the plan binds to the shield on request (`--irq`), by number:
/// published by the IRQs, read by whoever raises their threads; in the
/// audit, those the active shield bound to the audited CPUs (the IRQs'
/// audit read publishes them, the rules that judge IRQs read them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundIrqs(pub Vec<u32>);

impl Fact for BoundIrqs {
    const KEY: &'static str = "bound_irqs";
}

/// What the plan writes to RT throttling's runtime
/// (`/proc/sys/kernel/sched_rt_runtime_us`, `-1`: off), when it writes it:
/// published by whoever plans that write when it checks, read by whoever
/// must know whether throttling goes off (the guard plans before the
/// knobs that write it are made, and must be started before them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtRuntimeWritten(pub i64);

impl Fact for RtRuntimeWritten {
    const KEY: &'static str = "rt_runtime_written";
}

impl OwnFacts {
    /// Publishes a shared fact among a component's facts (the audit's),
    /// under its type's key.
    pub fn publish<F: Fact>(&mut self, fact: &F) {
        self.put(F::KEY, fact);
    }

    /// The shared fact of type `F`, when one was published.
    pub fn fact<F: Fact>(&self) -> Option<F> {
        self.get(F::KEY)
    }
}

/// The facts of one plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts(OwnFacts);

impl Facts {
    /// Publishes `fact`, over one of its type published before.
    pub fn publish<F: Fact>(&mut self, fact: &F) {
        self.0.put(F::KEY, fact);
    }

    /// The fact of type `F`, when one was published.
    pub fn get<F: Fact>(&self) -> Option<F> {
        self.0.get(F::KEY)
    }
}
