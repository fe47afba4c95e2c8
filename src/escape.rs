//! Strings from outside, made safe for the place they are shown. A process
//! or thread name (`comm`, up to 15 bytes any user chooses), a command
//! line, a cgroup or unit name, an IRQ's action name, a value read from a
//! results file: none of them is cpushield's, and each sink has its own
//! syntax that such a string must not be able to leave or forge. One
//! function per sink:
//!
//! - the terminal, text and tables ([`terminal`], [`terminal_bytes`]):
//!   every control character (C0, DEL, C1: the ESC that starts a terminal
//!   sequence, the C1 CSI that does the same alone, a newline that would
//!   forge a line) and every invisible format character (bidirectional
//!   overrides, zero-width) shown as an escape, `\` doubled so that the
//!   text says which bytes the name held;
//! - Prometheus label values ([`prometheus_label`]): backslash, double
//!   quote and line feed escaped as the text exposition format says;
//! - Nagios plugin output ([`nagios`]): as the terminal, and `|`, which
//!   starts the performance data, too.
//!
//! JSON needs nothing here: serde escapes every control character.
//! [`Terminal`] is the last line for the terminal: a writer that escapes
//! whatever control character reaches standard output in a report,
//! should a name have been printed without [`terminal`].

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// `s` for a terminal, on one line, its bytes recognisable: printable text
/// as it is; `\` as `\\`; ESC, newline, tab, carriage return as `\e`,
/// `\n`, `\t`, `\r`; other control characters as `\xNN` (C0, DEL) or
/// `\u{NN}` (C1: `\xNN` is a byte that is not UTF-8 in
/// [`terminal_bytes`]); invisible format characters as `\u{N}`. Borrowed when nothing needs
/// escaping.
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_char(&mut out, c);
    }
    Cow::Owned(out)
}

/// [`terminal`] for bytes that may not be UTF-8 (what a trace or a file
/// holds): bytes that are not UTF-8 as `\xNN`.
pub fn terminal_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_char(&mut out, c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// `s` as a Prometheus label value, to go between the double quotes of
/// `name="..."`: backslash, double quote and line feed escaped (`\\`,
/// `\"`, `\n`), the only escapes of the text exposition format.
pub fn prometheus_label(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` in a Nagios plugin's output: as [`terminal`] (one line, no control
/// character), and `|`, which would start the performance data, as
/// `\x7c`.
pub fn nagios(s: &str) -> String {
    terminal(s).replace('|', "\\x7c")
}

/// Whether [`terminal`] shows `c` other than as itself.
fn needs_escape(c: char) -> bool {
    c == '\\' || c.is_control() || invisible(c)
}

/// Appends `c` to `out` as [`terminal`] shows it.
fn push_char(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\x1b' => out.push_str("\\e"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 && c.is_control() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if c.is_control() || invisible(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// Format characters that change how the text around them reads without
/// showing themselves: zero-width characters, bidirectional marks,
/// embeddings, overrides and isolates, the soft hyphen, the BOM.
fn invisible(c: char) -> bool {
    matches!(c as u32, 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x2069 | 0xfeff | 0xad)
}

/// A writer for a report on standard output that lets no control
/// character through but the report's own line feeds and tabs: C0 as
/// [`terminal`] shows it, DEL and a C1 control (UTF-8 `C2 80`..`C2 9F`)
/// as `\u007f`, `\u009b`: also their JSON escapes, so that a `--json`
/// report (where serde escapes C0 but leaves DEL and C1 raw) stays the
/// same JSON. A name that reached a report without
/// [`terminal`] can then neither hide the rest of it nor drive the
/// terminal; its line feeds are [`terminal`]'s to escape.
pub struct Terminal<W: Write> {
    inner: W,
    /// A `C2` byte at the end of the last write: whether it starts a C1
    /// control depends on the next byte.
    pending_c2: bool,
}

impl<W: Write> Terminal<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Terminal {
            inner,
            pending_c2: false,
        }
    }

    /// The bytes `buf` becomes, given a `C2` held back from before.
    fn filter(&mut self, buf: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(buf.len() + 8);
        let mut held = std::mem::take(&mut self.pending_c2);
        for (i, &b) in buf.iter().enumerate() {
            if held {
                held = false;
                if (0x80..=0x9f).contains(&b) {
                    let _ = write!(out, "\\u{b:04x}");
                    continue;
                }
                out.push(0xc2);
            }
            match b {
                b'\n' | b'\t' => out.push(b),
                0xc2 if i + 1 == buf.len() => self.pending_c2 = true,
                0xc2 => held = true,
                0x7f => out.extend_from_slice(b"\\u007f"),
                b if b < 0x20 => {
                    let mut s = String::new();
                    push_char(&mut s, char::from(b));
                    out.extend_from_slice(s.as_bytes());
                }
                b => out.push(b),
            }
        }
        out
    }
}

impl<W: Write> Write for Terminal<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let out = self.filter(buf);
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for Terminal<W> {
    fn drop(&mut self) {
        if std::mem::take(&mut self.pending_c2) {
            let _ = self.inner.write_all(&[0xc2]);
        }
        let _ = self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminal_sees_no_control_character_and_every_byte_is_said() {
        assert_eq!(terminal("ksoftirqd/3"), "ksoftirqd/3");
        assert!(matches!(terminal("plain"), Cow::Borrowed(_)));
        assert_eq!(terminal("x\x1b[8m"), "x\\e[8m");
        assert_eq!(terminal("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(terminal("del\x7f c1\u{9b}2J"), "del\\x7f c1\\u{9b}2J");
        assert_eq!(terminal("a\\e"), "a\\\\e");
        assert_eq!(terminal("\u{202e}txt"), "\\u{202e}txt");
        assert_eq!(terminal_bytes(b"a\xffb\x1b"), "a\\xffb\\e");
    }

    #[test]
    fn a_label_value_cannot_leave_its_quotes() {
        let v = "idle\"} 1\ncpushield_shield_up 1\n#\\";
        assert_eq!(
            prometheus_label(v),
            "idle\\\"} 1\\ncpushield_shield_up 1\\n#\\\\"
        );
        assert!(matches!(prometheus_label("shielded"), Cow::Borrowed(_)));
    }

    #[test]
    fn nagios_text_has_no_pipe_and_one_line() {
        assert_eq!(nagios("a|b=1\nc"), "a\\x7cb=1\\nc");
    }

    fn through(chunks: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = Terminal::new(&mut out);
            for c in chunks {
                w.write_all(c).unwrap();
            }
        }
        out
    }

    #[test]
    fn the_writer_keeps_lines_and_text_and_escapes_controls_also_split() {
        let out = through(&[b"name x\x1b[8m\tcpus\n", "é \u{9b}".as_bytes()]);
        assert_eq!(out, b"name x\\e[8m\tcpus\n\xc3\xa9 \\u009b");
        // A C1 control cut between two writes.
        assert_eq!(through(&[b"a\xc2", b"\x9bb"]), b"a\\u009bb");
        // A C2 that starts a printable character is kept.
        assert_eq!(through(&[b"\xc2", b"\xb5s"]), "µs".as_bytes());
        assert_eq!(through(&[b"x\x7f\x00"]), b"x\\u007f\\x00");
    }

    #[test]
    fn json_through_the_writer_is_the_same_json() {
        let v = serde_json::json!({"name": "x\u{9b}2J\u{7f}\u{1b}"});
        let out = through(&[serde_json::to_string(&v).unwrap().as_bytes()]);
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(back, v);
    }
}
