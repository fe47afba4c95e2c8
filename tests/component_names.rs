//! A component is its own file or folder plus its line in the registry
//! (ARCHITECTURE.md, "Adding a component"): no file of `src/` outside the
//! component and the registry (`src/shield/components/mod.rs`, its line
//! and what it offers the commands) names the component's module, as
//! `components::NAME` anywhere or `NAME::` inside `src/shield`.

mod common;

use std::path::Path;

const REGISTRY: &str = "src/shield/components/mod.rs";

/// The components the registry lists, one per line of `registry! { .. }`.
fn registry() -> Vec<String> {
    let text = std::fs::read_to_string(REGISTRY).unwrap();
    let start = text.find("\nregistry! {").expect("the registry");
    let body = &text[start..];
    let body = &body[..body.find("\n}").unwrap()];
    (body.lines().skip(2))
        .filter_map(|l| l.trim().strip_suffix(','))
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect()
}

/// Whether `text` names module `name` as `prefix` + `name::` where the
/// character before `prefix` is not part of a path (`crate::guard::` is
/// the guard daemon's module, not the component).
fn names(text: &str, name: &str, path_only: bool) -> bool {
    let wanted = format!("components::{name}");
    let by_registry = text.match_indices(&wanted).any(|(i, _)| {
        !(text[i + wanted.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    });
    if by_registry || path_only {
        return by_registry;
    }
    let wanted = format!("{name}::");
    text.match_indices(&wanted).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        match before {
            Some(c) if c.is_alphanumeric() || c == '_' => false,
            Some(':') => text[..i].ends_with("super::") || text[..i].ends_with("self::"),
            _ => true,
        }
    })
}

#[test]
fn no_file_outside_a_component_and_the_registry_names_it() {
    let components = registry();
    assert!(components.len() >= 12, "{components:?}");
    let files = common::rust_sources(Path::new("src"));
    let mut found = Vec::new();
    for file in &files {
        let rel = file.to_string_lossy().replace('\\', "/");
        if rel == REGISTRY {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for c in &components {
            let own_dir = format!("src/shield/components/{c}/");
            let own_file = format!("src/shield/components/{c}.rs");
            if rel.starts_with(&own_dir) || rel == own_file {
                continue;
            }
            if names(&text, c, !rel.starts_with("src/shield/")) {
                found.push(format!("{rel} names {c}"));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_matcher_tells_a_component_from_a_module_of_the_same_name() {
    assert!(names("use super::guard::Hold;", "guard", false));
    assert!(names("let x = knobs::knob(n);", "knobs", false));
    assert!(names(
        "crate::shield::components::irqbalance::running",
        "irqbalance",
        true
    ));
    assert!(!names("crate::guard::kernel::protection()", "guard", false));
    assert!(!names("sys::fixture::resctrl::Model", "resctrl", false));
    assert!(!names("components::irqs_bound", "irqs", true));
    assert!(!names("my_knobs::x", "knobs", false));
}
