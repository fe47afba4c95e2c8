//! The shape the code keeps (ARCHITECTURE.md): no file in `src/` over 800
//! lines of product code (the lines before its `#[cfg(test)] mod`), and no
//! function over 100 lines, counted from its `fn` line to the closing brace
//! at its own indentation (`cargo fmt` puts it there).

mod common;

use std::path::Path;

const MAX_FILE: usize = 800;
const MAX_FN: usize = 100;

/// Lines before the first top-level `#[cfg(test)]` followed by a `mod`.
fn product_lines(lines: &[&str]) -> usize {
    (0..lines.len())
        .find(|&i| {
            lines[i] == "#[cfg(test)]" && lines.get(i + 1).is_some_and(|l| l.starts_with("mod "))
        })
        .unwrap_or(lines.len())
}

/// Each function with a body: its name and its length in lines.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let after = ["pub ", "pub(crate) ", "pub(super) ", "const ", "async "]
            .iter()
            .fold(body, |b, p| b.strip_prefix(p).unwrap_or(b));
        let after = match after.strip_prefix("pub(in ") {
            Some(rest) => rest.split_once(") ").map_or(after, |(_, r)| r),
            None => after,
        };
        let Some(rest) = after.strip_prefix("fn ") else {
            continue;
        };
        // A body on the line itself: `fn f() {}`.
        if body.trim_end().ends_with('}') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The signature ends at `{` (a body) or `;` (a trait method without one).
        let Some(open) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (open + 1..lines.len()).find(|&j| lines[j] == close) {
            out.push((name, end - i + 1));
        }
    }
    out
}

#[test]
fn no_file_over_800_product_lines_and_no_function_over_100() {
    let files = common::rust_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(files.len() > 50, "the sources were not found");
    let mut over = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let product = product_lines(&lines);
        if product > MAX_FILE {
            over.push(format!("{}: {product} product lines", f.display()));
        }
        for (name, n) in functions(&lines) {
            if n > MAX_FN {
                over.push(format!("{}: fn {name} has {n} lines", f.display()));
            }
        }
    }
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

#[test]
fn the_counts_are_right_on_a_sample() {
    let sample = "\
use x;

pub fn short() {
    a();
}

impl T {
    pub(in crate::shield) fn method(
        &self,
    ) -> u32 {
        1
    }
}

trait U {
    fn declared(&self);
}

#[cfg(test)]
mod tests {
    fn in_tests() {}
}
";
    let lines: Vec<&str> = sample.lines().collect();
    assert_eq!(product_lines(&lines), 18);
    assert_eq!(
        functions(&lines),
        [("short".to_string(), 3), ("method".to_string(), 5)]
    );
}
