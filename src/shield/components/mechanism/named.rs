//! The named sets of the shield as the other components and the commands
//! see them: the sets a request asks for, the request without one, and
//! where each set's cgroup is ([`super::sets`] makes and changes them).

pub use super::options::{sets as of, without};
pub use super::sets::{dir, holding, unit, NamedSet};
