//! The exit statuses of every command: one table, from which come the
//! constants the code returns, the table `cpushield --help` prints and the
//! README's table (tests/exit_codes.rs checks that the README has it as
//! generated here).

/// One exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The code.
    pub code: u8,
    /// What it means, one line (`--help`).
    pub meaning: &'static str,
    /// What it means, in full (the README).
    pub detail: &'static str,
    /// What a script that gets it would do (the README).
    pub then: &'static str,
}

macro_rules! exit_statuses {
    ($($(#[$doc:meta])* $name:ident = $code:literal, $meaning:literal, $detail:literal, $then:literal;)*) => {
        $($(#[$doc])* pub const $name: u8 = $code;)*
        /// Every exit status, in the order of their codes.
        pub const TABLE: &[ExitStatus] = &[$(ExitStatus {
            code: $code,
            meaning: $meaning,
            detail: $detail,
            then: $then,
        }),*];
    };
}

exit_statuses! {
    /// Success.
    SUCCESS = 0,
    "success (status: no shield, or the shield holds; off: also nothing to undo)",
    "success. `status`: no shield, or the shield holds. `off`: also when there was nothing to undo (it says so on one line)",
    "go on";
    /// Something failed that is not the request's fault (I/O, a damaged
    /// journal, a fatal change the kernel refused, rolled back).
    ERROR = 1,
    "error (I/O, damaged journal, a fatal change refused and rolled back)",
    "error: I/O, a damaged journal (`status`, `on`, `apply` refuse it; `off` restores what its readable records hold), a fatal change the kernel refused (rolled back)",
    "read the message";
    /// Bad input or a request refused; nothing was changed (also clap's
    /// usage errors).
    REFUSED = 2,
    "bad input or refused request; nothing was changed",
    "bad input or refused request (an invalid config file: file and line are named; malformed or absent CPUs, no housekeeping CPU, split siblings, unknown IRQ or knob, `run`/`move` without a shield, no cpuset support); nothing was changed",
    "fix the input";
    /// `status`, `verify`: a shield is active but no longer holds.
    BROKEN = 3,
    "status, verify: a shield is active but broken (what and how to repair are printed)",
    "`status`, `verify`: a shield is active but broken: what broke and how to repair it are printed (`--json`: `broken`)",
    "repair (`cpushield apply`, or `on CPUS` again) or alert";
    /// Changing the system needs root; nothing was changed.
    NOT_ROOT = 4,
    "not root; nothing was changed",
    "not root; nothing was changed",
    "use sudo";
    /// `off`, or the rollback of a failed `on`, could not restore
    /// everything, or `off` found the journal damaged and restored only
    /// what its readable records hold.
    PARTLY_RESTORED = 5,
    "partly restored: off (or on's rollback) could not restore all, or a damaged journal",
    "partly restored: `off`, or the rollback of a failed `on`, could not restore everything; the journal is kept for another `off`. Also `off` on a damaged journal: it restored what the readable records hold and names what it could not read (that stays as the shield left it); with nothing left to retry, the journal is kept as `/run/cpushield/journal.damaged`",
    "fix what is named, run `off` again";
    /// Another cpushield holds the lock (or another tool the trace
    /// instance); nothing was changed.
    BUSY = 6,
    "another cpushield is running; nothing was changed",
    "another cpushield is running (or, for `measure --explain`, another tracer holds tracefs); nothing was changed",
    "retry later";
    /// `verify`: the machine does not match the config, though what is
    /// there holds.
    DIFFERS = 7,
    "verify: the machine does not match the config (the shield holds)",
    "`verify`: the machine does not match the config (no shield, other CPUs, IRQs or knobs), though what is there holds",
    "`cpushield apply`";
    /// `verify`: the machine matches the config and the shield holds, but
    /// the boot half takes effect (or goes) only at the next reboot.
    REBOOT_PENDING = 8,
    "verify: matches and holds, but the boot half needs a reboot to take effect (or to go)",
    "`verify`: matches and holds, but the boot half takes effect (or goes) only at the next reboot",
    "schedule a reboot";
    /// `audit --fail-on SEVERITY`: a finding that bad or worse.
    AUDIT_FAILED = 9,
    "audit --fail-on: a finding at or above the severity named",
    "`audit --fail-on bad|warn`: a finding at or above that severity (the findings say what and what to do); without `--fail-on` the audit exits 0",
    "fix what the findings name, or gate the CI job on it";
    /// `certify`: the budget is not met.
    BUDGET_FAILED = 10,
    "certify: FAIL, the budget is not met",
    "`certify`: FAIL: a term of the budget is not met on a measured CPU (the verdict names the term, the CPU and the samples)",
    "fix the machine or the budget; see the worst samples";
    /// `certify`: the evidence cannot tell, or the run was cut short.
    BUDGET_INCONCLUSIVE = 11,
    "certify: INCONCLUSIVE, the evidence cannot tell, or the run was cut short",
    "`certify`: INCONCLUSIVE: too few deadlines to decide at the confidence asked (the verdict says how many would), a max term whose tail could not be extrapolated (heavy, dependent, drifting, a run under a minute) or whose fitted tail says a repeat of the run could exceed it, or the run was interrupted or its load stopped",
    "what the reason names: run longer (`--duration`), the boot half, a quieter load";
    /// `run`: the command could not be started (as a shell says it).
    CANNOT_EXEC = 127,
    "run: the command could not be started",
    "`run`: the command could not be started",
    "fix the command";
    /// `compare`: stopped by Ctrl-C or SIGTERM; the phases measured so far
    /// are reported and everything is undone (as a shell says it).
    INTERRUPTED = 130,
    "compare: interrupted (Ctrl-C); the phases so far are reported, all undone",
    "`compare`: interrupted (Ctrl-C or SIGTERM); the phases measured so far are reported and written, the shield and the load are undone",
    "look at the partial results";
}

/// The table `cpushield --help` prints.
pub fn help() -> String {
    let mut out = String::from("Exit status:\n");
    for s in TABLE {
        out.push_str(&format!("  {:<4} {}\n", s.code, s.meaning));
    }
    out.push_str("  run  otherwise the command's own exit status");
    out
}

/// The README's table (Markdown).
pub fn markdown() -> String {
    let mut out = String::from("| code | meaning | a script would |\n|---|---|---|\n");
    for s in TABLE {
        out.push_str(&format!("| {} | {} | {} |\n", s.code, s.detail, s.then));
    }
    out
}

/// `code` when `failed`, else success.
pub fn exit_if(failed: bool, code: u8) -> std::process::ExitCode {
    if failed {
        std::process::ExitCode::from(code)
    } else {
        std::process::ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_in_order() {
        let codes: Vec<u8> = TABLE.iter().map(|s| s.code).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted);
        assert_eq!(TABLE.len(), 14);
        assert_eq!((BROKEN, INTERRUPTED), (3, 130));
    }

    #[test]
    fn help_has_a_line_per_code() {
        let help = help();
        for s in TABLE {
            assert!(
                help.contains(&format!("  {:<4} {}", s.code, s.meaning)),
                "{help}"
            );
        }
    }
}
