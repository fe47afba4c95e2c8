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
/// published by the IRQs, read by whoever raises their threads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundIrqs(pub Vec<u32>);

impl Fact for BoundIrqs {
    const KEY: &'static str = "bound_irqs";
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
