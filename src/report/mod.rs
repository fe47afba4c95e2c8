//! Reporting an experiment: the summary and ratio tables ([`table`]), the
//! latency histogram figure as SVG and PNG ([`plot`]) and the self-contained
//! `report.html` ([`html`]).
//!
//! The input types ([`Curve`], [`PhaseStats`], [`SummaryTable`]) do not
//! depend on the measurement engine: whoever measured fills them in. This
//! module writes only the files it is asked to write.

mod glyphs;
pub mod html;
pub mod plot;
pub mod table;

use std::path::PathBuf;

pub use html::{escape_html, render_html, HtmlReport};
pub use plot::{svg_string, write_png, write_svg, PlotOptions};
pub use table::{
    Curve, PhaseStats, Ratio, RatioRow, SummaryTable, DEFAULT_THRESHOLDS_US, IDLE, SHIELDED,
    UNSHIELDED,
};

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
