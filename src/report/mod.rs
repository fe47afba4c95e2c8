//! Reports: tables, plots and the HTML page of an experiment.
