//! The kernel's trace records, as `trace_pipe` prints them, read into the
//! few events the explanation needs, whatever names the tasks chose.
//!
//! A record is `COMM-PID [CPU] FLAGS SECS.USECS: EVENT: FIELDS\n`; with
//! the `mono` trace clock its time is CLOCK_MONOTONIC, the measuring
//! loops' clock, at the text output's resolution of 1 µs. `CPU:N [LOST M
//! EVENTS]` records are counted apart. Idle is the switch to pid 0
//! (`power:cpu_idle` would add two events to every wake-up and nothing to
//! the chain).
//!
//! # Names are data
//!
//! A task names itself anything of up to 15 bytes but NUL (`prctl
//! PR_SET_NAME`, `/proc/self/comm`; `echo NAME > /proc/self/comm` keeps
//! the newline), and the kernel prints that name as it is: in every
//! record's head (`%16s`, the task running then) and in `sched_switch`'s
//! `prev_comm`/`next_comm` and `sched_wakeup`'s `comm`. Read as lines, a
//! name with a newline cut a switch in two, the switch was not read, and
//! the time of the task switched to was charged to the task before it.
//! So the reader never trusts a name's extent and identifies tasks by pid:
//!
//! 1. **Records, not lines** ([`Splitter`]). A newline ends a record only
//!    when the bytes after it start a record: a head whose byte 16 is the
//!    `-` after the `%16s` name, then `PID [CPU] FLAGS SECS.USECS: `,
//!    all of it kernel-made, or a `CPU:N [LOST M EVENTS]` line. Within a
//!    head the 16 name bytes are skipped, not searched. A newline inside
//!    a name in a record's fields is followed, 16 bytes on, by that
//!    event's fixed text (` prev_pid=N`, ` next_pid=N next_prio=N`,
//!    ` pid=N prio=N target_cpu=N`), which never holds `-PID [CPU] `
//!    there: it never starts a record.
//! 2. **Fields from the ends names cannot reach** ([`parse`]). A record's
//!    CPU, time and running pid come from its head; `sched_switch`'s
//!    `next_pid` and `sched_wakeup`'s `pid` are read from the record's
//!    end, after the last name. `prev_pid` and the names are taken only
//!    when exactly one way of cutting the two names (at most 15 bytes
//!    each) fits the whole format; otherwise `next_comm` is `None` (the
//!    pid is still known) and `prev_pid` is the head's pid.
//! 3. **Evidence is checked, not assumed** (`chain`). Every record's head
//!    names the task current on its CPU when it was written (the
//!    kernel's `common_pid`). Where that is not the task the replay had
//!    running, a switch was not read: the time since the last event is
//!    `unexplained`, and so is everything outside an interrupt until the
//!    next switch is read. A record that does not parse
//!    ([`Kind::Unreadable`]) does the same; one without a head at all
//!    ([`Line::Garbled`]) does it on every CPU.
//! 4. **Names are shown escaped** ([`escape`]): control bytes, `\` and
//!    bytes that are not UTF-8 as `\n`, `\\`, `\xNN`, so a report line
//!    stays one line and a name cannot pose as another field.
//!
//! Why text and not the binary ring buffers (`per_cpu/cpuN/trace_pipe_raw`
//! pages decoded with each event's `format`, as libtraceevent and rtla
//! do): the binary fields need no such care, but a second decoder of the
//! ring buffer's page and event headers (time extends, absolute stamps,
//! missed-event flags, the merge of the CPUs by time) that has not been
//! checked against pages recorded on the kernels cpushield supports
//! would fail silently where this reader says `unexplained`. The
//! tracefs output options do not help either: `raw`, `hex` and `bin`
//! print only the event's type id for events defined by `TRACE_EVENT`
//! (their raw, hex and binary printers are `trace_nop_print`). The text
//! format is the kernel's stable interface for `trace_pipe`; what it
//! leaves ambiguous is bounded (15 bytes a name) and handled above, and
//! the tests prove it over hostile and generated names.
//!
//! One writer is trusted: root can write anything into the instance's
//! `trace_marker`; such a record reads as [`Kind::Unreadable`] unless it
//! forges whole records, which takes root.

/// The events enabled in the trace instance, as `system:event`. Those the
/// running kernel lacks (the x86 vectors elsewhere) are skipped.
pub const EVENTS: &[&str] = &[
    "sched:sched_switch",
    "sched:sched_wakeup",
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "timer:hrtimer_expire_entry",
    "timer:hrtimer_expire_exit",
    "irq_vectors:local_timer_entry",
    "irq_vectors:local_timer_exit",
    "irq_vectors:reschedule_entry",
    "irq_vectors:reschedule_exit",
    "irq_vectors:call_function_entry",
    "irq_vectors:call_function_exit",
    "irq_vectors:call_function_single_entry",
    "irq_vectors:call_function_single_exit",
    "irq_vectors:irq_work_entry",
    "irq_vectors:irq_work_exit",
    "irq_vectors:x86_platform_ipi_entry",
    "irq_vectors:x86_platform_ipi_exit",
];

/// x86 interrupt vectors traced, by their event name's stem.
const VECTORS: &[&str] = &[
    "local_timer",
    "reschedule",
    "call_function_single",
    "call_function",
    "irq_work",
    "x86_platform_ipi",
];

/// The longest task name, bytes (`TASK_COMM_LEN` - 1).
pub const COMM_MAX: usize = 15;

/// The width of the name in a record's head (`%16s`).
const HEAD_COMM: usize = 16;

/// A record longer than this without a record after it is cut there
/// (a real one is a few hundred bytes at most): the reader's memory stays
/// bounded whatever it is fed.
pub const RECORD_MAX: usize = 64 * 1024;

/// One parsed trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The CPU it happened on.
    pub cpu: u32,
    /// CLOCK_MONOTONIC, ns (µs resolution).
    pub ts_ns: u64,
    /// The task current on `cpu` when it was written (the record head's
    /// pid, the kernel's `common_pid`; 0: idle). For a switch, the task
    /// that stops running.
    pub pid: i32,
    /// What happened.
    pub kind: Kind,
}

/// The events the explanation reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The CPU switched from one task to another (pid 0: idle).
    Switch {
        /// The task that stops running.
        prev_pid: i32,
        /// The task that runs next.
        next_pid: i32,
        /// Its name, [`escape`]d; `None` when the record does not say
        /// which of its bytes are the name.
        next_comm: Option<String>,
    },
    /// A task was woken.
    Wakeup {
        /// Its thread id.
        pid: i32,
    },
    /// A device interrupt handler starts.
    IrqEntry {
        /// The IRQ number.
        irq: u32,
        /// Its action's name.
        name: String,
    },
    /// A device interrupt handler returns.
    IrqExit,
    /// A softirq starts.
    SoftirqEntry {
        /// `TIMER`, `NET_RX`, `RCU`, ...
        name: String,
    },
    /// A softirq ends.
    SoftirqExit,
    /// An x86 vector's handler starts (`local_timer`, `reschedule`, ...).
    VectorEntry {
        /// The vector's event stem.
        name: &'static str,
    },
    /// An x86 vector's handler returns.
    VectorExit,
    /// An hrtimer's callback starts (`hrtimer_wakeup`: a sleeper's timer;
    /// `tick_nohz_handler` / `tick_sched_timer`: the tick).
    HrtimerEntry {
        /// The callback's symbol.
        function: String,
    },
    /// An hrtimer's callback returns.
    HrtimerExit,
    /// A record of this CPU whose fields do not parse, or of an event not
    /// enabled: what it changed is not known.
    Unreadable,
}

/// What one record of `trace_pipe` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// An event, read or [`Kind::Unreadable`].
    Event(Event),
    /// The kernel dropped this many events of that CPU (buffer full).
    Lost {
        /// The CPU.
        cpu: u32,
        /// How many.
        events: u64,
    },
    /// Bytes without a record head: not even the CPU is known.
    Garbled,
}

/// `bytes` as text that is one line and says which bytes it held: the
/// terminal's escaping of names from outside ([`crate::escape::terminal_bytes`]).
pub fn escape(bytes: &[u8]) -> String {
    crate::escape::terminal_bytes(bytes)
}

/// Whether the bytes at the start of `b` begin a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Yes; its first this many bytes are its head (kernel-made after the
    /// name: no record starts inside them).
    Yes(usize),
    /// No.
    No,
    /// Not known until more bytes come.
    More,
}

/// A record's head, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    pid: i32,
    cpu: u32,
    ts_ns: u64,
    /// Bytes up to and with the `: ` after the time.
    len: usize,
}

/// Reads `b` from its start: `Err(true)` when it ran out of bytes before
/// it could say, `Err(false)` when it is not what was asked for.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

type Step<T> = Result<T, bool>;

impl Cursor<'_> {
    fn peek(&self) -> Step<u8> {
        self.b.get(self.i).copied().ok_or(true)
    }

    fn lit(&mut self, s: &[u8]) -> Step<()> {
        for &want in s {
            if self.peek()? != want {
                return Err(false);
            }
            self.i += 1;
        }
        Ok(())
    }

    /// At least one and at most `max` decimal digits, as a number.
    fn digits(&mut self, max: usize) -> Step<u64> {
        let from = self.i;
        let mut n: u64 = 0;
        while self.peek()?.is_ascii_digit() {
            if self.i - from == max {
                return Err(false);
            }
            n = n * 10 + u64::from(self.b[self.i] - b'0');
            self.i += 1;
        }
        if self.i == from {
            return Err(false);
        }
        Ok(n)
    }

    /// Spaces, at least `min`, at most `max`.
    fn spaces(&mut self, min: usize, max: usize) -> Step<()> {
        let from = self.i;
        while self.peek()? == b' ' {
            if self.i - from == max {
                return Err(false);
            }
            self.i += 1;
        }
        if self.i - from < min {
            return Err(false);
        }
        Ok(())
    }
}

/// `COMM(16 bytes)-PID [(TGID) ][CPU] [FLAGS ]SECS.USECS: ` (trace_print_context:
/// `%16s-%-7d `, `(%7d) ` with record-tgid, `[%03d] `, the flags with
/// irq-info, `%5llu.%06lu: `).
fn head(b: &[u8]) -> Step<Head> {
    let mut c = Cursor { b, i: HEAD_COMM };
    c.lit(b"-")?;
    let pid = i32::try_from(c.digits(10)?).map_err(|_| false)?;
    c.spaces(1, 8)?;
    if c.peek()? == b'(' {
        c.i += 1;
        let from = c.i;
        while matches!(c.peek()?, b' ' | b'-' | b'0'..=b'9') {
            if c.i - from == 12 {
                return Err(false);
            }
            c.i += 1;
        }
        c.lit(b") ")?;
    }
    c.lit(b"[")?;
    let cpu = u32::try_from(c.digits(6)?).map_err(|_| false)?;
    c.lit(b"] ")?;
    // The flags (`d.h1.`, `d...`), when irq-info prints them: letters,
    // digits and dots, then a space; the time has a dot and six digits
    // and ends in `: `.
    let flags_from = c.i;
    while matches!(c.peek()?, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.') {
        if c.i - flags_from == 12 {
            return Err(false);
        }
        c.i += 1;
    }
    if c.peek()? == b' ' {
        c.spaces(1, 20)?;
    } else {
        c.i = flags_from;
        c.spaces(0, 20)?;
    }
    let secs = c.digits(12)?;
    c.lit(b".")?;
    let from = c.i;
    let usecs = c.digits(6)?;
    if c.i - from != 6 {
        return Err(false);
    }
    c.lit(b": ")?;
    let ts_ns = secs
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(usecs * 1000))
        .ok_or(false)?;
    Ok(Head {
        pid,
        cpu,
        ts_ns,
        len: c.i,
    })
}

/// `CPU:N [LOST M EVENTS]`: `(cpu, events, length)`.
fn lost(b: &[u8]) -> Step<(u32, u64, usize)> {
    let mut c = Cursor { b, i: 0 };
    c.lit(b"CPU:")?;
    let cpu = u32::try_from(c.digits(6)?).map_err(|_| false)?;
    c.lit(b" [LOST ")?;
    let events = c.digits(19)?;
    c.lit(b" EVENTS]")?;
    Ok((cpu, events, c.i))
}

fn start(b: &[u8]) -> Start {
    let verdict = |r: Step<usize>| match r {
        Ok(n) => Start::Yes(n),
        Err(true) => Start::More,
        Err(false) => Start::No,
    };
    if b"CPU:".starts_with(&b[..b.len().min(4)]) {
        // A LOST line is a whole line: it must end there.
        let l = lost(b).and_then(|(_, _, n)| match b.get(n) {
            Some(b'\n') => Ok(n),
            Some(_) => Err(false),
            None => Err(true),
        });
        match verdict(l) {
            Start::No => {}
            other => return other,
        }
    }
    // Up to byte 16 the name may hold anything, a newline too: `head`
    // waits for the `-` there.
    verdict(head(b).map(|h| h.len))
}

/// Cuts the bytes of `trace_pipe` into records (see the module's
/// documentation): [`Splitter::push`] what was read, take the records
/// that are whole with [`Splitter::next_record`], and the rest with
/// [`Splitter::finish`] at the end.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: Vec<u8>,
    /// Where the record being read starts.
    start: usize,
    /// Where the search for its end goes on.
    scan: usize,
    /// Whether its head was checked (the first record's is not, yet).
    head_known: bool,
}

impl Splitter {
    /// An empty splitter at the start of a stream.
    pub fn new() -> Splitter {
        Splitter::default()
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.scan -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole record, without its newline; `None` until more
    /// bytes say where it ends.
    pub fn next_record(&mut self) -> Option<Vec<u8>> {
        if !self.head_known {
            match start(&self.buf[self.start..]) {
                Start::Yes(n) => {
                    self.scan = self.scan.max(self.start + n);
                    self.head_known = true;
                }
                Start::No => self.head_known = true,
                Start::More => return None,
            }
        }
        loop {
            let Some(at) = self.buf[self.scan..].iter().position(|&b| b == b'\n') else {
                self.scan = self.buf.len();
                if self.buf.len() - self.start > RECORD_MAX {
                    return Some(self.cut(self.buf.len(), 0, false));
                }
                return None;
            };
            let nl = self.scan + at;
            match start(&self.buf[nl + 1..]) {
                Start::Yes(n) => return Some(self.cut(nl, n, true)),
                Start::No => self.scan = nl + 1,
                Start::More => {
                    self.scan = nl;
                    if self.buf.len() - self.start > RECORD_MAX {
                        return Some(self.cut(nl, 0, false));
                    }
                    return None;
                }
            }
        }
    }

    /// Ends the record being read at `end` (a newline, or the end of the
    /// bytes) and starts the next after it, its head `head` bytes long
    /// when `known`.
    fn cut(&mut self, end: usize, head: usize, known: bool) -> Vec<u8> {
        let record = self.buf[self.start..end].to_vec();
        self.start = (end + 1).min(self.buf.len());
        self.scan = self.start + head;
        self.head_known = known;
        record
    }

    /// The records left at the end of the stream (the last one's newline
    /// taken off).
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(r) = self.next_record() {
            out.push(r);
        }
        let mut rest = &self.buf[self.start..];
        if let Some(r) = rest.strip_suffix(b"\n") {
            rest = r;
        }
        if !rest.is_empty() {
            out.push(rest.to_vec());
        }
        out
    }
}

/// Parses one record (as [`Splitter`] cut it, without its newline).
pub fn parse(record: &[u8]) -> Line {
    if let Ok((cpu, events, n)) = lost(record) {
        if n == record.len() {
            return Line::Lost { cpu, events };
        }
    }
    let Ok(h) = head(record) else {
        return Line::Garbled;
    };
    let rest = &record[h.len..];
    let (name, body) = match find(rest, b": ") {
        Some(i) => (&rest[..i], &rest[i + 2..]),
        None => (rest, &[][..]),
    };
    Line::Event(Event {
        cpu: h.cpu,
        ts_ns: h.ts_ns,
        pid: h.pid,
        kind: kind_of(name, body, h.pid).unwrap_or(Kind::Unreadable),
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `key=value` of a field whose value holds no space (kernel-made fields
/// only: IRQ numbers, symbols).
fn field<'a>(body: &'a [u8], key: &str) -> Option<&'a [u8]> {
    body.split(|&b| b == b' ')
        .find_map(|w| w.strip_prefix(key.as_bytes())?.strip_prefix(b"="))
}

fn number<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Takes a decimal number (with a `-` when `signed`) off the end of `b`,
/// then `key` before it: `(what is left, the number)`.
fn take_number_back<'a>(b: &'a [u8], key: &[u8], signed: bool) -> Option<(&'a [u8], i64)> {
    let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let mut at = b.len() - digits;
    let mut n: i64 = number(&b[at..])?;
    if signed && at > 0 && b[at - 1] == b'-' {
        at -= 1;
        n = -n;
    }
    Some((b[..at].strip_suffix(key)?, n))
}

fn pid_of(n: i64) -> Option<i32> {
    i32::try_from(n).ok().filter(|p| *p >= 0)
}

fn kind_of(name: &[u8], body: &[u8], head_pid: i32) -> Option<Kind> {
    Some(match name {
        b"sched_switch" => switch(body, head_pid)?,
        b"sched_wakeup" => {
            // comm=NAME pid=N prio=N target_cpu=NNN: from the end.
            let (rest, _) = take_number_back(body, b" target_cpu=", false)?;
            let (rest, _) = take_number_back(rest, b" prio=", true)?;
            let (rest, pid) = take_number_back(rest, b" pid=", false)?;
            rest.strip_prefix(b"comm=")?;
            Kind::Wakeup { pid: pid_of(pid)? }
        }
        b"irq_handler_entry" => {
            let rest = body.strip_prefix(b"irq=")?;
            let at = find(rest, b" name=")?;
            Kind::IrqEntry {
                irq: number(&rest[..at])?,
                name: escape(&rest[at + b" name=".len()..]),
            }
        }
        b"irq_handler_exit" => Kind::IrqExit,
        b"softirq_entry" => {
            // vec=3 [action=NET_RX]
            let a = &body[find(body, b"[action=")? + b"[action=".len()..];
            Kind::SoftirqEntry {
                name: escape(a.strip_suffix(b"]")?),
            }
        }
        b"softirq_exit" => Kind::SoftirqExit,
        b"hrtimer_expire_entry" => Kind::HrtimerEntry {
            function: escape(field(body, "function")?),
        },
        b"hrtimer_expire_exit" => Kind::HrtimerExit,
        _ => {
            let name = std::str::from_utf8(name).ok()?;
            let (stem, entry) = match name.strip_suffix("_entry") {
                Some(s) => (s, true),
                None => (name.strip_suffix("_exit")?, false),
            };
            let stem = VECTORS.iter().find(|v| **v == stem)?;
            if entry {
                Kind::VectorEntry { name: stem }
            } else {
                Kind::VectorExit
            }
        }
    })
}

/// `prev_comm=A prev_pid=N prev_prio=N prev_state=S ==> next_comm=B
/// next_pid=N next_prio=N`. `next_pid` comes off the end; the names are
/// taken when exactly one cut of them (each at most [`COMM_MAX`] bytes)
/// fits the rest. With the kernel's format there is never a second: two
/// ` ==> next_comm=` within 15 bytes of each other would overlap, and the
/// text does not overlap itself. The check stays so that a format this
/// reader does not know gives no name rather than a wrong one.
fn switch(body: &[u8], head_pid: i32) -> Option<Kind> {
    let (rest, _) = take_number_back(body, b" next_prio=", true)?;
    let (rest, next_pid) = take_number_back(rest, b" next_pid=", false)?;
    let next_pid = pid_of(next_pid)?;
    let mut fits = (0..=COMM_MAX.min(rest.len())).filter_map(|n| {
        let (before, next_comm) = rest.split_at(rest.len() - n);
        let prev_pid = switch_prev(before.strip_suffix(b" ==> next_comm=")?)?;
        Some((prev_pid, next_comm))
    });
    let (prev_pid, next_comm) = match (fits.next(), fits.next()) {
        (Some((prev_pid, comm)), None) => (prev_pid, Some(escape(comm))),
        _ => (head_pid, None),
    };
    Some(Kind::Switch {
        prev_pid,
        next_pid,
        next_comm,
    })
}

/// `prev_comm=A prev_pid=N prev_prio=N prev_state=S` → `prev_pid`.
fn switch_prev(b: &[u8]) -> Option<i32> {
    // The state: `R`, `S`, `D|K`, `R+`, or leftover bits as `0x40`.
    let state = b
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'|' | b'+'))
        .count();
    if state == 0 {
        return None;
    }
    let rest = b[..b.len() - state].strip_suffix(b" prev_state=")?;
    let (rest, _) = take_number_back(rest, b" prev_prio=", true)?;
    let (rest, pid) = take_number_back(rest, b" prev_pid=", false)?;
    let comm = rest.strip_prefix(b"prev_comm=")?;
    (comm.len() <= COMM_MAX).then_some(())?;
    pid_of(pid)
}

/// Writes records as the kernel prints them, for tests: the head
/// (`%16s-%-7d [%03d] d.h1. %5llu.%06lu: `) and each event's print
/// format, names as raw bytes.
#[cfg(test)]
pub mod render {
    /// A record head: `comm` the running task's name, `pid` its pid.
    pub fn head(comm: &[u8], pid: i32, cpu: u32, ts_us: u64) -> Vec<u8> {
        let mut out = vec![b' '; 16usize.saturating_sub(comm.len())];
        out.extend_from_slice(comm);
        out.extend_from_slice(
            format!(
                "-{pid:<7} [{cpu:03}] d.h1. {:>5}.{:06}: ",
                ts_us / 1_000_000,
                ts_us % 1_000_000
            )
            .as_bytes(),
        );
        out
    }

    /// A whole record: the head, `event: `, the fields, a newline.
    pub fn record(head: Vec<u8>, event: &str, fields: &[u8]) -> Vec<u8> {
        let mut out = head;
        out.extend_from_slice(event.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(fields);
        out.push(b'\n');
        out
    }

    /// `sched_switch`'s fields.
    pub fn switch(
        prev: &[u8],
        prev_pid: i32,
        next: &[u8],
        next_pid: i32,
        next_prio: i32,
    ) -> Vec<u8> {
        let mut out = b"prev_comm=".to_vec();
        out.extend_from_slice(prev);
        out.extend_from_slice(
            format!(" prev_pid={prev_pid} prev_prio=120 prev_state=R+ ==> next_comm=").as_bytes(),
        );
        out.extend_from_slice(next);
        out.extend_from_slice(format!(" next_pid={next_pid} next_prio={next_prio}").as_bytes());
        out
    }

    /// `sched_wakeup`'s fields.
    pub fn wakeup(comm: &[u8], pid: i32, prio: i32, cpu: u32) -> Vec<u8> {
        let mut out = b"comm=".to_vec();
        out.extend_from_slice(comm);
        out.extend_from_slice(format!(" pid={pid} prio={prio} target_cpu={cpu:03}").as_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(line: &str) -> Line {
        parse(line.as_bytes())
    }

    fn ev(line: &str) -> Event {
        match parse_str(line) {
            Line::Event(e) if e.kind != Kind::Unreadable => e,
            other => panic!("{line:?} parsed as {other:?}"),
        }
    }

    /// Every record of `stream`, cut in pieces of `chunk` bytes.
    fn split(stream: &[u8], chunk: usize) -> Vec<Vec<u8>> {
        let mut s = Splitter::new();
        let mut out = Vec::new();
        for piece in stream.chunks(chunk.max(1)) {
            s.push(piece);
            while let Some(r) = s.next_record() {
                out.push(r);
            }
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn a_lone_newline_is_no_record() {
        assert!(split(b"\n", 1).is_empty());
        assert!(split(b"", 1).is_empty());
        assert_eq!(split(b"x\n", 1), vec![b"x".to_vec()]);
    }

    #[test]
    fn switch_with_spaces_in_names() {
        let e = ev("   kworker/3:1 H-77      [003] d..2.  1234.567891: sched_switch: prev_comm=kworker/3:1 H prev_pid=77 prev_prio=120 prev_state=I ==> next_comm=measure cpu3 next_pid=901 next_prio=0");
        assert_eq!(e.cpu, 3);
        assert_eq!(e.ts_ns, 1_234_567_891_000);
        assert_eq!(e.pid, 77);
        assert_eq!(
            e.kind,
            Kind::Switch {
                prev_pid: 77,
                next_pid: 901,
                next_comm: Some("measure cpu3".into()),
            }
        );
    }

    #[test]
    fn irq_softirq_vector_hrtimer_idle() {
        let k = |l: &str| ev(l).kind;
        assert_eq!(
            k("          <idle>-0       [002] d.h1.    10.000001: irq_handler_entry: irq=45 name=nvme0q3"),
            Kind::IrqEntry {
                irq: 45,
                name: "nvme0q3".into()
            }
        );
        assert_eq!(
            k("          <idle>-0       [002] ..s1.    10.000002: softirq_entry: vec=3 [action=NET_RX]"),
            Kind::SoftirqEntry {
                name: "NET_RX".into()
            }
        );
        assert_eq!(
            k("          <idle>-0       [002] d.h1.    10.000003: local_timer_entry: vector=236"),
            Kind::VectorEntry {
                name: "local_timer"
            }
        );
        assert_eq!(
            k("          <idle>-0       [002] d.h1.    10.000003: call_function_single_exit: vector=251"),
            Kind::VectorExit
        );
        assert_eq!(
            k("          <idle>-0       [002] d.h2.    10.000004: hrtimer_expire_entry: hrtimer=00000000a1b2c3d4 function=hrtimer_wakeup now=10000003999"),
            Kind::HrtimerEntry {
                function: "hrtimer_wakeup".into()
            }
        );
        // 6.1's head has four flags; 6.12's five.
        assert_eq!(
            k("              sh-50      [001] d...    10.000007: sched_wakeup: comm=sh pid=51 prio=120 target_cpu=001"),
            Kind::Wakeup { pid: 51 }
        );
        // record-tgid's column; no irq-info flags.
        let e = ev("              sh-50      (     50) [001]    10.000007: sched_wakeup: comm=sh pid=51 prio=120 target_cpu=001");
        assert_eq!((e.cpu, e.pid, e.kind), (1, 50, Kind::Wakeup { pid: 51 }));
    }

    #[test]
    fn lost_garbled_and_unreadable_records() {
        assert_eq!(
            parse_str("CPU:3 [LOST 1234 EVENTS]"),
            Line::Lost {
                cpu: 3,
                events: 1234
            }
        );
        // An event not enabled, or fields that do not parse: the CPU and
        // time are known, what happened is not.
        for line in [
            "              sh-50      [001] d...    10.000007: sched_migrate_task: comm=sh",
            "              sh-50      [001] d...    10.000007: sched_switch: prev_comm=sh",
            "              sh-50      [001] d...    10.000007: sched_wakeup: pid=51",
        ] {
            match parse_str(line) {
                Line::Event(e) => {
                    assert_eq!((e.cpu, e.pid, e.kind), (1, 50, Kind::Unreadable), "{line}")
                }
                other => panic!("{line}: {other:?}"),
            }
        }
        assert_eq!(parse_str("garbage"), Line::Garbled);
        assert_eq!(parse_str(""), Line::Garbled);
        // The old line format with the name not padded to 16 is no head.
        assert_eq!(
            parse_str(
                "sh-50 [001] d... 10.000007: sched_wakeup: comm=sh pid=51 prio=120 target_cpu=001"
            ),
            Line::Garbled
        );
    }

    #[test]
    fn names_are_escaped_into_one_line() {
        assert_eq!(escape(b"qxhog\n"), "qxhog\\n");
        assert_eq!(escape(b"a\\b\tc\r\x1b[31m"), "a\\\\b\\tc\\r\\e[31m");
        assert_eq!(escape(b"\xff\xfeok"), "\\xff\\xfeok");
        assert_eq!(escape("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(
            escape("a\u{202e}b\u{200b}".as_bytes()),
            "a\\u{202e}b\\u{200b}"
        );
        assert_eq!(escape("\u{85}".as_bytes()), "\\u{85}");
    }

    /// The issue's case: `echo qxhog > /proc/self/comm` left a newline in
    /// the name of a SCHED_FIFO 90 spinner.
    fn qxhog_stream() -> Vec<u8> {
        use render::*;
        let mut s = Vec::new();
        s.extend(record(
            head(b"usleep", 221, 3, 21_798_000),
            "sched_switch",
            &switch(b"usleep", 221, b"qxhog\n", 222, 9),
        ));
        s.extend(record(
            head(b"qxhog\n", 222, 3, 21_803_016),
            "local_timer_entry",
            b"vector=236",
        ));
        s.extend(record(
            head(b"qxhog\n", 222, 3, 21_803_017),
            "sched_wakeup",
            &wakeup(b"cpushield-meas", 900, 49, 3),
        ));
        s.extend(record(
            head(b"qxhog\n", 222, 3, 21_803_018),
            "local_timer_exit",
            b"vector=236",
        ));
        s.extend(record(
            head(b"qxhog\n", 222, 3, 26_300_000),
            "sched_switch",
            &switch(b"qxhog\n", 222, b"cpushield-meas", 900, 49),
        ));
        s
    }

    #[test]
    fn a_newline_in_a_name_does_not_cut_a_record() {
        let stream = qxhog_stream();
        assert_eq!(
            String::from_utf8_lossy(&stream).lines().count(),
            11,
            "as lines, five records are eleven"
        );
        for chunk in [1, 7, 16, 17, 50, 4096] {
            let records = split(&stream, chunk);
            assert_eq!(records.len(), 5, "chunk {chunk}");
            let kinds: Vec<(i32, Kind)> = records
                .iter()
                .map(|r| match parse(r) {
                    Line::Event(e) => (e.pid, e.kind),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(
                kinds,
                vec![
                    (
                        221,
                        Kind::Switch {
                            prev_pid: 221,
                            next_pid: 222,
                            next_comm: Some("qxhog\\n".into())
                        }
                    ),
                    (
                        222,
                        Kind::VectorEntry {
                            name: "local_timer"
                        }
                    ),
                    (222, Kind::Wakeup { pid: 900 }),
                    (222, Kind::VectorExit),
                    (
                        222,
                        Kind::Switch {
                            prev_pid: 222,
                            next_pid: 900,
                            next_comm: Some("cpushield-meas".into())
                        }
                    ),
                ],
                "chunk {chunk}"
            );
        }
    }

    /// Names that imitate the trace's own text, up to the kernel's 15
    /// bytes (a longer name is cut there by the kernel).
    pub(crate) const HOSTILE: &[&[u8]] = &[
        b"qxhog\n",
        b"\n",
        b"\n\n\n",
        b"a\nb",
        b") R 1 2 (",
        b" prev_pid=9 ",
        b"==>",
        b"==> next_comm=",
        b" next_pid=5",
        b" next_prio=1",
        b"x next_pid=7 ne",
        b"[003]",
        b"-1 [003] d.h1.",
        b"\n-1      [003] ",
        b"\n          x-1 ",
        b"CPU:3 [LOST 9 E",
        b"\nCPU:3 [LOST 9 ",
        b" 21.000000: ",
        b": sched_switch:",
        b"comm=a pid=5 ",
        b"<idle>",
        b"123456789012345",
        b"\xff\xfe\xfd",
        b"\xe2\x80\xae\xe2\x80\x8b",
        b"",
        b" ",
        b"\\n",
        b"\x1b[2J\r",
    ];

    #[test]
    fn hostile_names_are_read_whole_or_not_at_all() {
        use render::*;
        for &name in HOSTILE {
            assert!(name.len() <= COMM_MAX && !name.contains(&0));
            for &other in HOSTILE {
                let mut s = Vec::new();
                s.extend(record(
                    head(other, 10, 1, 5_000_000),
                    "sched_switch",
                    &switch(other, 10, name, 20, -1),
                ));
                s.extend(record(
                    head(name, 20, 1, 5_000_001),
                    "sched_wakeup",
                    &wakeup(other, 10, 120, 1),
                ));
                s.extend(record(
                    head(name, 20, 1, 5_000_002),
                    "sched_switch",
                    &switch(name, 20, other, 10, 120),
                ));
                let records = split(&s, 13);
                let parsed: Vec<Line> = records.iter().map(|r| parse(r)).collect();
                let want = |pid, kind| {
                    Line::Event(Event {
                        cpu: 1,
                        ts_ns: 0,
                        pid,
                        kind,
                    })
                };
                let at_zero: Vec<Line> = parsed
                    .into_iter()
                    .map(|l| match l {
                        Line::Event(e) => Line::Event(Event { ts_ns: 0, ..e }),
                        l => l,
                    })
                    .collect();
                let ctx = format!("{name:?} / {other:?}");
                assert_eq!(
                    at_zero,
                    vec![
                        want(
                            10,
                            Kind::Switch {
                                prev_pid: 10,
                                next_pid: 20,
                                next_comm: Some(escape(name))
                            }
                        ),
                        want(20, Kind::Wakeup { pid: 10 }),
                        want(
                            20,
                            Kind::Switch {
                                prev_pid: 20,
                                next_pid: 10,
                                next_comm: Some(escape(other))
                            }
                        ),
                    ],
                    "{ctx}"
                );
            }
        }
    }

    #[test]
    fn a_name_longer_than_the_kernel_allows_leaves_only_its_pid() {
        use render::*;
        // Not what a kernel writes; read by its pid, never as another.
        let body = switch(b"a", 1, b"sixteen bytes!!!", 42, 9);
        let r = record(head(b"a", 1, 0, 1), "sched_switch", &body);
        let Line::Event(e) = parse(&r[..r.len() - 1]) else {
            panic!()
        };
        assert_eq!(
            e.kind,
            Kind::Switch {
                prev_pid: 1,
                next_pid: 42,
                next_comm: None
            }
        );
    }

    #[test]
    fn a_record_without_an_end_is_cut_at_the_bound() {
        let mut s = Splitter::new();
        let junk = vec![b'x'; RECORD_MAX + 10];
        s.push(&junk);
        let r = s.next_record().expect("cut");
        assert_eq!(r.len(), RECORD_MAX + 10);
        assert_eq!(parse(&r), Line::Garbled);
        assert!(s.next_record().is_none());
    }

    #[test]
    fn lost_records_start_records() {
        use render::*;
        let mut s = b"CPU:1 [LOST 12 EVENTS]\n".to_vec();
        s.extend(record(
            head(b"sh", 5, 1, 9),
            "irq_handler_exit",
            b"irq=1 ret=handled",
        ));
        s.extend(b"CPU:1 [LOST 3 EVENTS]\n");
        let lines: Vec<Line> = split(&s, 5).iter().map(|r| parse(r)).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], Line::Lost { cpu: 1, events: 12 });
        assert!(matches!(&lines[1], Line::Event(e) if e.kind == Kind::IrqExit));
        assert_eq!(lines[2], Line::Lost { cpu: 1, events: 3 });
    }

    mod generated {
        use super::super::*;
        use super::split;
        use proptest::prelude::*;

        /// Pieces of the trace's own text, for names that imitate it.
        const FRAGMENTS: &[&[u8]] = &[
            b"\n",
            b" ",
            b"-",
            b"=",
            b"(",
            b")",
            b"[",
            b"]",
            b":",
            b"1",
            b"42",
            b"-1",
            b"prev_comm=",
            b" prev_pid=",
            b" prev_prio=",
            b" prev_state=",
            b"R+",
            b" ==> next_comm=",
            b"==>",
            b" next_pid=",
            b" next_prio=",
            b"comm=",
            b" pid=",
            b" prio=",
            b" target_cpu=",
            b"[003] ",
            b"d.h1. ",
            b" 1.000000: ",
            b"sched_switch: ",
            b"CPU:1 [LOST ",
            b" EVENTS]",
            b"\xff",
            b"\xe2\x80",
        ];

        /// A task's name: any bytes but NUL, or pieces of trace text,
        /// cut to the kernel's 15 bytes.
        fn comm() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                proptest::collection::vec(1u8..=255, 0..=COMM_MAX),
                proptest::collection::vec(
                    prop_oneof![
                        proptest::sample::select(FRAGMENTS).prop_map(<[u8]>::to_vec),
                        proptest::collection::vec(1u8..=255, 1..3),
                    ],
                    0..6,
                )
                .prop_map(|parts| {
                    let mut name = parts.concat();
                    name.truncate(COMM_MAX);
                    name
                }),
            ]
        }

        /// One generated event: the running task's index, what happens.
        #[derive(Debug, Clone)]
        enum Gen {
            Switch(usize),
            Wakeup(usize),
            Irq(u32),
            Timer,
        }

        fn gen() -> impl Strategy<Value = Gen> {
            prop_oneof![
                (0usize..4).prop_map(Gen::Switch),
                (0usize..4).prop_map(Gen::Wakeup),
                (0u32..64).prop_map(Gen::Irq),
                Just(Gen::Timer),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Any names (every byte but NUL, up to 15) in the heads and
            /// fields of valid records, cut into any chunks: every record
            /// is read back as written, pids and names.
            #[test]
            fn generated_names_never_move_a_field(
                names in proptest::collection::vec(comm(), 4),
                events in proptest::collection::vec((gen(), 0u32..3), 1..40),
                chunk in 1usize..200,
            ) {
                use super::super::render::*;
                let pids = [0, 17, 4_194_303, 1234];
                let mut running = [0usize; 3];
                let mut stream = Vec::new();
                let mut want = Vec::new();
                for (i, (g, cpu)) in events.iter().enumerate() {
                    let ts = 1_000_000 + i as u64 * 3;
                    let cur = running[*cpu as usize];
                    let h = head(&names[cur], pids[cur], *cpu, ts);
                    let kind = match g {
                        Gen::Switch(next) => {
                            stream.extend(record(h, "sched_switch",
                                &switch(&names[cur], pids[cur], &names[*next], pids[*next], -1)));
                            running[*cpu as usize] = *next;
                            Kind::Switch { prev_pid: pids[cur], next_pid: pids[*next], next_comm: Some(escape(&names[*next])) }
                        }
                        Gen::Wakeup(t) => {
                            stream.extend(record(h, "sched_wakeup", &wakeup(&names[*t], pids[*t], -1, *cpu)));
                            Kind::Wakeup { pid: pids[*t] }
                        }
                        Gen::Irq(irq) => {
                            stream.extend(record(h, "irq_handler_entry", format!("irq={irq} name=eth0-rx-{irq}").as_bytes()));
                            Kind::IrqEntry { irq: *irq, name: format!("eth0-rx-{irq}") }
                        }
                        Gen::Timer => {
                            stream.extend(record(h, "local_timer_exit", b"vector=236"));
                            Kind::VectorExit
                        }
                    };
                    want.push(Event { cpu: *cpu, ts_ns: ts * 1000, pid: pids[cur], kind });
                }
                let got: Vec<Line> = split(&stream, chunk).iter().map(|r| parse(r)).collect();
                prop_assert_eq!(got.len(), want.len());
                // Names the kernel writes are always read: no two cuts of a
                // switch's names fit its format (see `switch`).
                for (g, w) in got.iter().zip(&want) {
                    prop_assert_eq!(g, &Line::Event(w.clone()));
                }
            }

            /// Whatever bytes come, in whatever chunks: no panic, records
            /// stay within the bound, and every byte is in one record.
            #[test]
            fn any_bytes_are_read_without_panic(
                bytes in proptest::collection::vec(any::<u8>(), 0..2000),
                chunk in 1usize..300,
            ) {
                let records = split(&bytes, chunk);
                let total: usize = records.iter().map(|r| r.len() + 1).sum();
                // A stream of a lone newline ends an empty record: none kept.
                let empty = bytes.is_empty() || bytes == b"\n";
                prop_assert!(
                    (records.is_empty() && empty) || (total >= bytes.len() && total <= bytes.len() + 1),
                    "{} records of {} bytes", records.len(), bytes.len()
                );
                for r in &records {
                    prop_assert!(r.len() <= RECORD_MAX + 4096);
                    let _ = parse(r);
                }
            }

            /// A real stream cut short at any offset reads without panic,
            /// and every whole record before the cut is read as before.
            #[test]
            fn a_stream_cut_anywhere_keeps_the_records_before_the_cut(
                name in comm(),
                cut in 0usize..2000,
            ) {
                use super::super::render::*;
                let mut stream = Vec::new();
                let mut ends = Vec::new();
                for i in 0..8u64 {
                    stream.extend(record(head(&name, 7, 2, 100 + i), "sched_switch",
                        &switch(&name, 7, &name, 7, 120)));
                    ends.push(stream.len());
                }
                let whole: Vec<Line> = split(&stream, 64).iter().map(|r| parse(r)).collect();
                prop_assert_eq!(whole.len(), 8);
                let cut = cut.min(stream.len());
                let part: Vec<Line> = split(&stream[..cut], 64).iter().map(|r| parse(r)).collect();
                // Every record before the cut, when the next record's head
                // (51 bytes) is before it too, is read as in the whole stream.
                let sure = ends.iter().filter(|&&end| end + 51 <= cut || end == cut).count();
                prop_assert!(part.len() >= sure);
                prop_assert_eq!(&part[..sure], &whole[..sure]);
            }
        }
    }
}
