//! Everything cpushield shows people, in one place: each command's report
//! ([`shield`] for status, on, verify, off and move, with the shield's
//! notes as sentences in [`note`]; [`audit`] for audit,
//! boot-args and the knob list; [`measure`] for a measurement and its
//! cyclictest histogram files; [`compare`] for the experiment's summary,
//! figures and `report.html`), and the pieces they share: the aligned
//! tables ([`table`]), the latency histogram figure as SVG and PNG
//! ([`plot`]) and the self-contained page ([`html`]).
//!
//! It renders what the rest of the library computed and depends on it;
//! nothing below depends on it. The JSON of every command is its report
//! type serialised, not rendered here.

/// The layout version of the `--json` output of `status`, `on`, `off`,
/// `move`, `audit`, `verify`, `boot` and `boot-args`, printed first as
/// `schema_version` (`measure`, `compare` and `certify` carry their own).
/// A field added keeps it; a field renamed, removed or changed in meaning
/// raises it. 2: a finding without a next step has `next` null (was
/// `""`), and in `on`'s `plan` a component's own step (irqbalance's
/// ban, resctrl's mount and shares, the guard) is `{"action": "own",
/// "owner": ..., "payload": {its own "action" and fields}}`. 3: what a
/// component reports of itself is its entry of `parts` (`component`,
/// `lines`, `data`, `findings`), no longer a field of its own: `on`'s and
/// `status`'s `cache` is the `data` of the part `resctrl`. 4: each line
/// labelled; the guard's and the kernel threads' fields became parts. 5:
/// `status`'s fields of the cgroups, threads, IRQs and workqueues, and
/// `on`'s of irqbalance, the threads and the IRQs, became parts
/// (docs/operations.md lists where each went). 6: the JSON convention
/// (docs/operations.md): a CPU set that is none is `null` (`off`'s
/// `shield`, `status`'s `boot_isolated`, `boot`'s `isolated` and
/// `nohz_full` were `""`), `on`'s `machine_wide` is always there, and an
/// error under `--json` is an object on stdout.
pub const JSON_SCHEMA_VERSION: u32 = 6;

pub mod audit;
pub mod boot;
pub mod certify;
pub mod certify_plot;
pub mod compare;
pub mod explain;
mod glyphs;
pub mod html;
pub mod measure;
pub mod nagios;
pub mod nfd;
pub mod note;
pub mod off;
pub mod plot;
pub mod shield;
pub mod table;

use std::path::PathBuf;

pub use html::{escape_html, render_html, HtmlReport};
pub use plot::{svg_string, write_png, write_svg, PlotOptions};

/// A failure to produce a report file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Drawing the figure failed.
    #[error("drawing the plot: {0}")]
    Plot(String),
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::durable::DurableError> for ReportError {
    fn from(e: crate::durable::DurableError) -> Self {
        ReportError::Io {
            path: e.path,
            source: e.source,
        }
    }
}

/// Writes a report file (mode 0644) through [`crate::durable`]: a planted
/// symlink at `path` is replaced, never followed.
pub fn write_report_file(path: &std::path::Path, data: &[u8]) -> Result<(), ReportError> {
    crate::durable::write_file(path, data, 0o644)?;
    Ok(())
}
