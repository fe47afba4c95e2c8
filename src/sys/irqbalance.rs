//! irqbalance's control socket: change the CPUs it bans while it runs.
//!
//! irqbalance built with its UI (Debian's is) listens on
//! `/run/irqbalance/irqbalance<PID>.sock` for root clients, who prove they
//! are root with `SCM_CREDENTIALS`. `settings cpus LIST` bans LIST in place
//! of the ban its environment gave it, and `settings cpus NULL` goes back
//! to that; either rebuilds its CPU tree at its next cycle, and it moves no
//! IRQ before. `setup` answers `SLEEP N [IRQ ...] BANNED MASK`. Through it
//! a ban needs no restart of irqbalance (its stop and start cost a
//! second of `on` and of `off` in the emulated test guest).
//!
//! irqbalance before 1.9.4 (Debian 12 has 1.9.2) sleeps one whole cycle
//! (`SLEEP`, 10 s by default) inside each rebuild, with its socket unread
//! (fixed upstream by "Fix socket API being blocked for 10s", March 2024).
//! A rebuild follows every ban change, so for up to two cycles after one
//! a message may wait that long for its answer: callers choose how long
//! they wait ([`QUICK`] or [`PATIENT`]).

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixCredentials};

use super::Sys;
use crate::cpulist::CpuSet;

/// The directory of irqbalance's socket, relative to the root.
pub const SOCKET_DIR: &str = "run/irqbalance";

/// How long `on` and `off` wait for an answer before they restart
/// irqbalance instead: an irqbalance in its main loop answers within
/// milliseconds (80 ms in the emulated guest under strace).
pub const QUICK: Duration = Duration::from_secs(1);

/// How long `status` waits: irqbalance's default cycle of 10 s, which an
/// irqbalance before 1.9.4 may spend asleep in a rebuild, plus 2 s.
pub const PATIENT: Duration = Duration::from_secs(12);

/// The socket of the irqbalance with process id `pid`, relative to the root.
pub fn socket_path(pid: i32) -> String {
    format!("{SOCKET_DIR}/irqbalance{pid}.sock")
}

/// The process ids of the irqbalance sockets under the root (a socket may
/// outlive an irqbalance that was killed).
pub fn socket_pids(sys: &Sys) -> Vec<i32> {
    let mut pids: Vec<i32> = sys
        .list(SOCKET_DIR)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| {
            n.strip_prefix("irqbalance")?
                .strip_suffix(".sock")?
                .parse()
                .ok()
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Sends `command` to irqbalance `pid` as one message with this process's
/// credentials and returns its answer (empty for `settings`), waiting at
/// most `wait` for irqbalance to read it and answer.
pub fn send(sys: &Sys, pid: i32, command: &str, wait: Duration) -> io::Result<String> {
    let stream = UnixStream::connect(sys.path(&socket_path(pid)))?;
    stream.set_read_timeout(Some(wait))?;
    stream.set_write_timeout(Some(wait))?;
    let credentials = UnixCredentials::new();
    let iov = [io::IoSlice::new(command.as_bytes())];
    let cmsg = [ControlMessage::ScmCredentials(&credentials)];
    let sent = sendmsg::<()>(stream.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(io::Error::from)?;
    if sent != command.len() {
        return Err(io::Error::other(format!(
            "irqbalance took {sent} of {} bytes",
            command.len()
        )));
    }
    let mut answer = String::new();
    (&stream).read_to_string(&mut answer)?;
    Ok(answer)
}

/// Bans `cpus` in irqbalance `pid` in place of its environment's ban, or
/// (`None`) goes back to its environment's ban; an error when irqbalance
/// did not take the message within [`QUICK`].
pub fn set_banned(sys: &Sys, pid: i32, cpus: Option<&CpuSet>) -> io::Result<()> {
    let list = match cpus {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => "NULL".to_string(),
    };
    send(sys, pid, &format!("settings cpus {list}"), QUICK).map(|_| ())
}

/// The CPUs irqbalance `pid` bans now (waiting up to [`PATIENT`]).
pub fn banned(sys: &Sys, pid: i32) -> io::Result<CpuSet> {
    let answer = send(sys, pid, "setup", PATIENT)?;
    parse_banned(&answer)
        .ok_or_else(|| io::Error::other(format!("irqbalance answered setup with {answer:?}")))
}

/// irqbalance's default cycle, in seconds.
pub const DEFAULT_INTERVAL_S: u64 = 10;

/// The cycle of irqbalance `pid` in seconds: its `-t N`/`--interval=N`
/// argument, else the default.
pub fn interval_s(sys: &Sys, pid: i32) -> u64 {
    sys.read(&format!("proc/{pid}/cmdline"))
        .ok()
        .and_then(|cmdline| interval_argument(&cmdline))
        .unwrap_or(DEFAULT_INTERVAL_S)
}

/// The interval an irqbalance command line (`\0`-separated) asks for.
fn interval_argument(cmdline: &str) -> Option<u64> {
    let args: Vec<&str> = cmdline.split('\0').collect();
    args.iter().enumerate().find_map(|(i, arg)| {
        let value = match *arg {
            "-t" | "--interval" => args.get(i + 1).copied(),
            _ => arg
                .strip_prefix("--interval=")
                .or_else(|| arg.strip_prefix("-t").filter(|v| !v.is_empty())),
        };
        value?.parse().ok()
    })
}

/// The CPUs of `BANNED MASK` in an answer to `setup` (the mask in the
/// kernel's cpumask format, as [`CpuSet::parse_mask`] reads it).
pub fn parse_banned(answer: &str) -> Option<CpuSet> {
    let mask = answer
        .split_whitespace()
        .skip_while(|w| *w != "BANNED")
        .nth(1)?;
    CpuSet::parse_mask(mask).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::IoSliceMut;
    use std::os::unix::net::UnixListener;

    use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned};

    #[test]
    fn the_interval_comes_from_t_or_interval_arguments() {
        assert_eq!(
            interval_argument("/usr/sbin/irqbalance\0--foreground\0"),
            None
        );
        assert_eq!(interval_argument("irqbalance\0-t\x0060\0"), Some(60));
        assert_eq!(interval_argument("irqbalance\0-t30\0"), Some(30));
        assert_eq!(interval_argument("irqbalance\0--interval=5\0-f\0"), Some(5));
        assert_eq!(interval_argument("irqbalance\0--interval\x007\0"), Some(7));
        assert_eq!(interval_argument("irqbalance\0-t\0"), None);
    }

    #[test]
    fn parse_banned_reads_the_cpumask_format() {
        let set = |s: &str| CpuSet::parse_list(s).unwrap();
        assert_eq!(parse_banned("SLEEP 10 BANNED 0000000c"), Some(set("2-3")));
        assert_eq!(
            parse_banned("SLEEP 10 IRQ 24 LOAD 0 DIFF 0 CLASS 5 BANNED 00000001,80000000"),
            Some(set("31-32"))
        );
        assert_eq!(
            parse_banned("SLEEP 10 BANNED 00000000"),
            Some(CpuSet::new())
        );
        assert_eq!(parse_banned("SLEEP 10"), None);
        assert_eq!(parse_banned("SLEEP 10 BANNED zz"), None);
    }

    /// A stand-in for irqbalance: takes one connection, checks the sender's
    /// credentials as irqbalance does, answers `setup`, returns what it got.
    fn fake_irqbalance(
        listener: UnixListener,
        banned: &'static str,
    ) -> std::thread::JoinHandle<(String, Option<u32>)> {
        std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            setsockopt(&conn, sockopt::PassCred, &true).unwrap();
            let mut buf = [0u8; 256];
            let mut cmsg = nix::cmsg_space!(libc::ucred);
            let (len, uid) = {
                let mut iov = [IoSliceMut::new(&mut buf)];
                let msg = recvmsg::<()>(
                    conn.as_raw_fd(),
                    &mut iov,
                    Some(&mut cmsg),
                    MsgFlags::empty(),
                )
                .unwrap();
                let uid = msg.cmsgs().unwrap().find_map(|c| match c {
                    ControlMessageOwned::ScmCredentials(cr) => Some(cr.uid()),
                    _ => None,
                });
                (msg.bytes, uid)
            };
            let got = String::from_utf8_lossy(&buf[..len]).to_string();
            if got.starts_with("setup") {
                use std::io::Write;
                (&conn)
                    .write_all(format!("SLEEP 10 BANNED {banned}").as_bytes())
                    .unwrap();
            }
            (got, uid)
        })
    }

    #[test]
    fn commands_reach_the_socket_with_credentials() {
        let root = tempfile::tempdir().unwrap();
        let sys = Sys::at(root.path());
        std::fs::create_dir_all(root.path().join(SOCKET_DIR)).unwrap();
        assert!(socket_pids(&sys).is_empty());
        let path = root.path().join(socket_path(4242));

        let server = fake_irqbalance(UnixListener::bind(&path).unwrap(), "0000000c");
        assert_eq!(socket_pids(&sys), [4242]);
        set_banned(&sys, 4242, Some(&CpuSet::parse_list("2-3").unwrap())).unwrap();
        let (got, uid) = server.join().unwrap();
        assert_eq!(got, "settings cpus 2-3");
        assert_eq!(uid, Some(nix::unistd::getuid().as_raw()));

        std::fs::remove_file(&path).unwrap();
        let server = fake_irqbalance(UnixListener::bind(&path).unwrap(), "0000000c");
        assert_eq!(
            banned(&sys, 4242).unwrap(),
            CpuSet::parse_list("2-3").unwrap()
        );
        assert_eq!(server.join().unwrap().0, "setup");

        std::fs::remove_file(&path).unwrap();
        let server = fake_irqbalance(UnixListener::bind(&path).unwrap(), "0");
        set_banned(&sys, 4242, None).unwrap();
        assert_eq!(server.join().unwrap().0, "settings cpus NULL");

        // Nobody listens on a socket left by a killed irqbalance.
        assert!(set_banned(&sys, 4242, None).is_err());
        assert!(banned(&sys, 7).is_err());
    }
}
