//! `run --user`: the command as another user, never in root's terminal
//! session. With a terminal on standard input the child gets a terminal of
//! its own (a pty) and this process relays between the two, forwarding
//! signals and the window size (as `sudo` does with `use_pty`); without
//! one, the child is the leader of a new session with no terminal. Either
//! way a `TIOCSTI` of the child's reaches only its own terminal, not the
//! shell that started `run`. The environment is reset as `sudo` does, the
//! descriptors above 2 are closed, and after the drop every capability set
//! and the securebits read back empty (docs/security.md).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::termios;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{Pid, User};

use crate::sys::syscalls;

/// `PATH` for the child, as Debian's `sudo` sets it (`secure_path`).
pub const SAFE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What of root's environment the child keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preserve {
    /// Only the terminal and locale variables (sudo's `env_reset`).
    Reset,
    /// All of it (`--preserve-env`).
    All,
    /// Those too, by name (`--preserve-env=A,B`).
    Names(Vec<String>),
}

impl Preserve {
    /// From `--preserve-env`: absent, bare (all), or a list of names.
    pub fn from_option(option: Option<&[String]>) -> Preserve {
        match option {
            None => Preserve::Reset,
            Some([]) => Preserve::All,
            Some(names) if names.iter().all(|n| n.is_empty()) => Preserve::All,
            Some(names) => {
                Preserve::Names(names.iter().filter(|n| !n.is_empty()).cloned().collect())
            }
        }
    }
}

/// Variables kept through the reset: the terminal's and the locale's.
fn kept_always(name: &str) -> bool {
    matches!(name, "TERM" | "COLORTERM" | "LANG" | "LANGUAGE" | "TZ") || name.starts_with("LC_")
}

/// The child's environment: from root's `parent`, what `preserve` keeps,
/// then `PATH`, `HOME`, `USER`, `LOGNAME` and `SHELL` for `user` (the
/// account's own, never root's, unless `--preserve-env` keeps them all).
pub fn environment(
    parent: impl IntoIterator<Item = (String, String)>,
    user: &User,
    preserve: &Preserve,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = parent
        .into_iter()
        .filter(|(name, _)| match preserve {
            Preserve::All => true,
            Preserve::Reset => kept_always(name),
            Preserve::Names(names) => kept_always(name) || names.iter().any(|n| n == name),
        })
        .collect();
    let keeps = |name: &str| match preserve {
        Preserve::All => true,
        Preserve::Reset => false,
        Preserve::Names(names) => names.iter().any(|n| n == name),
    };
    let home = user.dir.to_string_lossy().into_owned();
    let shell = user.shell.to_string_lossy().into_owned();
    for (name, value) in [
        ("PATH", SAFE_PATH.to_string()),
        ("HOME", home),
        ("USER", user.name.clone()),
        ("LOGNAME", user.name.clone()),
        ("SHELL", shell),
    ] {
        if !keeps(name) || !env.contains_key(name) {
            env.insert(name.to_string(), value);
        }
    }
    env
}

/// Drops to `user`: its groups, then its gid, then its uid (after setuid
/// the others could no longer change); then reads back that uid 0 cannot
/// be regained, and that every capability set and the securebits are
/// empty.
pub fn drop_privileges(user: &User) -> io::Result<()> {
    let fail = |what: &str, e: nix::Error| io::Error::other(format!("{what}: {e}"));
    let name = CString::new(user.name.clone()).map_err(io::Error::other)?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|e| fail("reading the user's groups", e))?;
    nix::unistd::setgroups(&groups).map_err(|e| fail("dropping supplementary groups", e))?;
    nix::unistd::setgid(user.gid).map_err(|e| fail("dropping group privileges", e))?;
    nix::unistd::setuid(user.uid).map_err(|e| fail("dropping user privileges", e))?;
    if user.uid.is_root() {
        return Ok(());
    }
    if nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).is_ok() {
        return Err(io::Error::other(format!(
            "privileges could not be dropped for user {}",
            user.name
        )));
    }
    let status = std::fs::read_to_string("/proc/self/status")?;
    let left = capabilities_left(&status);
    let bits = syscalls::securebits()?;
    if !left.is_empty() || bits != 0 {
        return Err(io::Error::other(format!(
            "after dropping to user {}: capabilities left ({}), securebits {bits:#x}",
            user.name,
            if left.is_empty() {
                "none".into()
            } else {
                left.join(", ")
            }
        )));
    }
    Ok(())
}

/// The capability sets of `/proc/self/status` that are not empty
/// (inheritable, permitted, effective, ambient), as `CapPrm=...`.
pub fn capabilities_left(status: &str) -> Vec<String> {
    status
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| matches!(*k, "CapInh" | "CapPrm" | "CapEff" | "CapAmb"))
        .filter(|(_, v)| u64::from_str_radix(v.trim(), 16) != Ok(0))
        .map(|(k, v)| format!("{k}={}", v.trim()))
        .collect()
}

/// Marks every descriptor above 2 close-on-exec.
fn close_on_exec_above_stdio() -> io::Result<()> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // A descriptor of the listing itself is gone by now: EBADF is fine.
        let _ = nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
    Ok(())
}

/// The signals the parent forwards (and SIGCHLD, SIGWINCH), blocked in
/// the parent so that its signalfd reads them.
fn relayed_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGWINCH,
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ] {
        set.add(s);
    }
    set
}

/// Runs `command` as `user` in a session of its own. The child calls
/// `enter` first (it moves itself into the shield, with the policy), then
/// drops to `user` with the environment `preserve` keeps, the working
/// directory kept where the user may enter it (else the user's home, else
/// `/`), and
/// execs. Returns the command's exit code (128 + N for signal N). Call it
/// while this process has one thread.
pub fn run_as(
    user: &User,
    command: &[String],
    preserve: &Preserve,
    enter: impl FnOnce() -> Result<(), String>,
) -> io::Result<i32> {
    let stdin = io::stdin();
    let pty = match nix::unistd::isatty(stdin.as_raw_fd()).unwrap_or(false) {
        true => Some(open_pty(&stdin)?),
        false => None,
    };
    let mask = relayed_signals();
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)
        .map_err(io::Error::from)?;
    let Some(child) = syscalls::fork_single_threaded()? else {
        let error = child_exec(user, command, preserve, pty.map(|p| p.1), enter);
        let _ = writeln!(io::stderr(), "cpushield: {error}");
        std::process::exit(127);
    };
    let child = Pid::from_raw(child);
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC).map_err(io::Error::from)?;
    let code = match pty {
        Some((master, slave)) => {
            drop(slave);
            relay(child, &master, &signals)
        }
        None => wait_forwarding(child, &signals),
    };
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&mask), None);
    code
}

/// A pty sized and set up like the terminal on `stdin`: (master, slave).
fn open_pty(stdin: &io::Stdin) -> io::Result<(OwnedFd, OwnedFd)> {
    let size = syscalls::window_size(stdin).ok();
    let modes = termios::tcgetattr(stdin.as_fd()).ok();
    let pty = nix::pty::openpty(size.as_ref(), modes.as_ref()).map_err(io::Error::from)?;
    nix::fcntl::fcntl(
        pty.master.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(io::Error::from)?;
    Ok((pty.master, pty.slave))
}

/// In the child: a new session (on the pty `slave` when given), into the
/// shield, down to `user`, then exec. Returns only on failure, with why.
fn child_exec(
    user: &User,
    command: &[String],
    preserve: &Preserve,
    slave: Option<OwnedFd>,
    enter: impl FnOnce() -> Result<(), String>,
) -> String {
    if let Err(e) = nix::unistd::setsid() {
        return format!("a new session for the command: {e}");
    }
    if let Some(slave) = slave {
        let on_stdio = syscalls::set_controlling_terminal(&slave).and_then(|()| {
            for fd in 0..=2 {
                nix::unistd::dup2(slave.as_raw_fd(), fd).map_err(io::Error::from)?;
            }
            Ok(())
        });
        if let Err(e) = on_stdio {
            return format!("the command's terminal: {e}");
        }
    }
    if let Err(e) = enter() {
        return e;
    }
    let env = environment(std::env::vars(), user, preserve);
    let cwd = std::env::current_dir().ok();
    if let Err(e) = drop_privileges(user) {
        return e.to_string();
    }
    let enterable = cwd
        .as_ref()
        .is_some_and(|d| nix::unistd::access(d, nix::unistd::AccessFlags::X_OK).is_ok());
    let home_enterable = nix::unistd::access(&user.dir, nix::unistd::AccessFlags::X_OK).is_ok();
    let dir = match (enterable, home_enterable) {
        (true, _) => cwd.unwrap_or_default(),
        (false, true) => user.dir.clone(),
        (false, false) => "/".into(),
    };
    if let Err(e) = close_on_exec_above_stdio() {
        return format!("closing descriptors: {e}");
    }
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    let (program, args) = command.split_first().expect("clap requires a command");
    let error = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(&env)
        .current_dir(&dir)
        .exec();
    format!("cannot run {program}: {error}")
}

/// Without a terminal: waits for `child`, forwarding the signals.
fn wait_forwarding(child: Pid, signals: &SignalFd) -> io::Result<i32> {
    loop {
        let Some(info) = signals.read_signal().map_err(io::Error::from)? else {
            continue;
        };
        match Signal::try_from(info.ssi_signo as i32) {
            Ok(Signal::SIGCHLD) => {
                if let Some(code) = reaped(child)? {
                    return Ok(code);
                }
            }
            Ok(Signal::SIGWINCH) => {}
            Ok(other) => {
                let _ = nix::sys::signal::kill(child, other);
            }
            Err(_) => {}
        }
    }
}

/// The exit code of `child` if it ended.
fn reaped(child: Pid) -> io::Result<Option<i32>> {
    match waitpid(child, Some(WaitPidFlag::WNOHANG)).map_err(io::Error::from)? {
        WaitStatus::Exited(_, code) => Ok(Some(code)),
        WaitStatus::Signaled(_, signal, _) => Ok(Some(128 + signal as i32)),
        _ => Ok(None),
    }
}

/// Puts the terminal on standard input in raw mode until dropped, so that
/// every key reaches the child's terminal, which interprets it.
struct RawMode(Option<termios::Termios>);

impl RawMode {
    fn enter() -> RawMode {
        let stdin = io::stdin();
        let Ok(saved) = termios::tcgetattr(stdin.as_fd()) else {
            return RawMode(None);
        };
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        let _ = termios::tcsetattr(stdin.as_fd(), termios::SetArg::TCSADRAIN, &raw);
        RawMode(Some(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = termios::tcsetattr(io::stdin().as_fd(), termios::SetArg::TCSADRAIN, saved);
        }
    }
}

/// With a terminal: relays keys to the child's terminal and its output
/// back, its window size along, until the child ends.
fn relay(child: Pid, master: &OwnedFd, signals: &SignalFd) -> io::Result<i32> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let _raw = RawMode::enter();
    let stdin = io::stdin();
    let mut out = io::stdout();
    let mut keys_open = true;
    let mut buf = [0u8; 4096];
    let mut from_master = std::fs::File::from(master.try_clone()?);
    let mut to_master = std::fs::File::from(master.try_clone()?);
    loop {
        let mut fds = vec![
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(master.as_fd(), PollFlags::POLLIN),
        ];
        if keys_open {
            fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        let (sig, out_ready, key) = (
            ready(&fds[0]),
            ready(&fds[1]),
            fds.get(2).is_some_and(ready),
        );
        drop(fds);
        if out_ready {
            match from_master.read(&mut buf) {
                Ok(0) | Err(_) => {}
                Ok(n) => {
                    out.write_all(&buf[..n])?;
                    out.flush()?;
                }
            }
        }
        if key {
            match stdin.lock().read(&mut buf) {
                Ok(0) | Err(_) => keys_open = false,
                Ok(n) => to_master.write_all(&buf[..n])?,
            }
        }
        if sig {
            if let Some(code) = on_signal(child, master, signals)? {
                drain(&mut from_master, &mut out);
                return Ok(code);
            }
        }
    }
}

/// One signal for the parent: the child's end, a new window size, or one
/// to forward.
fn on_signal(child: Pid, master: &OwnedFd, signals: &SignalFd) -> io::Result<Option<i32>> {
    let Some(info) = signals.read_signal().map_err(io::Error::from)? else {
        return Ok(None);
    };
    match Signal::try_from(info.ssi_signo as i32) {
        Ok(Signal::SIGCHLD) => reaped(child),
        Ok(Signal::SIGWINCH) => {
            if let Ok(size) = syscalls::window_size(&io::stdin()) {
                let _ = syscalls::set_window_size(master, &size);
            }
            Ok(None)
        }
        Ok(other) => {
            let _ = nix::sys::signal::kill(child, other);
            Ok(None)
        }
        Err(_) => Ok(None),
    }
}

/// What the child's terminal still holds once it ended.
fn drain(from_master: &mut std::fs::File, out: &mut io::Stdout) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [PollFd::new(from_master.as_fd(), PollFlags::POLLIN)];
        if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
            return;
        }
        match from_master.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let _ = out.write_all(&buf[..n]);
                let _ = out.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> User {
        User {
            name: "ada".into(),
            passwd: CString::new("x").unwrap(),
            uid: nix::unistd::Uid::from_raw(1000),
            gid: nix::unistd::Gid::from_raw(1000),
            gecos: CString::new("").unwrap(),
            dir: "/home/ada".into(),
            shell: "/bin/bash".into(),
        }
    }

    fn roots() -> Vec<(String, String)> {
        [
            ("PATH", "/root/bin:/usr/sbin"),
            ("HOME", "/root"),
            ("USER", "root"),
            ("AWS_SECRET", "s3cr3t"),
            ("TERM", "xterm"),
            ("LC_ALL", "C.UTF-8"),
            ("LD_PRELOAD", "/tmp/x.so"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn the_reset_keeps_the_terminal_and_locale_and_gives_the_users_own_account() {
        let env = environment(roots(), &user(), &Preserve::Reset);
        assert_eq!(env.get("PATH").map(String::as_str), Some(SAFE_PATH));
        assert_eq!(env.get("HOME").map(String::as_str), Some("/home/ada"));
        assert_eq!(env.get("USER").map(String::as_str), Some("ada"));
        assert_eq!(env.get("LOGNAME").map(String::as_str), Some("ada"));
        assert_eq!(env.get("SHELL").map(String::as_str), Some("/bin/bash"));
        assert_eq!(env.get("TERM").map(String::as_str), Some("xterm"));
        assert_eq!(env.get("LC_ALL").map(String::as_str), Some("C.UTF-8"));
        assert!(
            !env.contains_key("AWS_SECRET") && !env.contains_key("LD_PRELOAD"),
            "{env:?}"
        );
    }

    #[test]
    fn preserve_env_keeps_what_it_names_or_everything() {
        let names = Preserve::from_option(Some(&["AWS_SECRET".to_string()]));
        let env = environment(roots(), &user(), &names);
        assert_eq!(env.get("AWS_SECRET").map(String::as_str), Some("s3cr3t"));
        assert!(!env.contains_key("LD_PRELOAD"));
        assert_eq!(env.get("HOME").map(String::as_str), Some("/home/ada"));
        let all = environment(roots(), &user(), &Preserve::from_option(Some(&[])));
        assert_eq!(all.get("HOME").map(String::as_str), Some("/root"));
        assert_eq!(all.get("LD_PRELOAD").map(String::as_str), Some("/tmp/x.so"));
        assert_eq!(Preserve::from_option(None), Preserve::Reset);
    }

    #[test]
    fn any_capability_set_left_is_named() {
        let clean = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n";
        assert!(capabilities_left(clean).is_empty());
        let kept = clean.replace("CapPrm:\t0000000000000000", "CapPrm:\t0000000000000400");
        assert_eq!(
            capabilities_left(&kept),
            vec!["CapPrm=0000000000000400".to_string()]
        );
    }
}
