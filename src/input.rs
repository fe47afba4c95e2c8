//! What the user hands cpushield, kept in bounds: errors quote at most a
//! short prefix of an input, with its length ([`quote`], [`brief`]), and
//! files named by the user are read only when they are regular files of
//! bounded size ([`read_file`]).
//!
//! A CPU list, an IRQ name or a config can be as long as the user likes
//! (a 110 kB CPU list, a 5,000-character IRQ name); an error that echoed
//! them whole would be as long. Every error that names an input goes
//! through [`quote`] (or [`brief`] for text shown without quotes), so an
//! error stays a few hundred bytes whatever the input.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// At most this many bytes of an input's escaped text are quoted in an
/// error; a longer input is cut there and its length is said.
pub const QUOTED_BYTES: usize = 40;

/// The largest config file cpushield reads (1 MiB): a real one is a few
/// hundred bytes.
pub const CONFIG_LIMIT: u64 = 1 << 20;

/// `input` quoted for an error message, as Rust's `{:?}` quotes it
/// (control characters such as a newline escaped), when its escaped text
/// fits in [`QUOTED_BYTES`]; otherwise its first characters, `…`, and its
/// length: `"0,1,2,3,…" (110000 bytes)`.
pub fn quote(input: &str) -> String {
    quote_to(input, QUOTED_BYTES)
}

/// [`quote`] with room for `max` bytes of escaped text rather than
/// [`QUOTED_BYTES`]: for what the kernel reads back, whose whole text
/// (an invalid partition's reason) is the diagnosis.
pub fn quote_to(input: &str, max: usize) -> String {
    match prefix_to(input, max, true) {
        Ok(all) => format!("\"{all}\""),
        Err(cut) => format!("\"{cut}…\" ({} bytes)", input.len()),
    }
}

/// `text` as it is when short, for text an error shows without quotes
/// (a CPU set it computed, a parser's message that embeds the input);
/// otherwise its first characters, `…`, and its length:
/// `0,2,4,6,8,… (20470 bytes)`. Control characters are escaped either way.
pub fn brief(text: &str) -> String {
    brief_to(text, QUOTED_BYTES)
}

/// [`brief`] with room for `max` bytes of escaped text rather than
/// [`QUOTED_BYTES`] (a parser's whole message, which says more than an input).
pub fn brief_to(text: &str, max: usize) -> String {
    match prefix_to(text, max, false) {
        Ok(all) => all,
        Err(cut) => format!("{cut}… ({} bytes)", text.len()),
    }
}

/// The text of `input` escaped as `{:?}` escapes it (`quoted`), or with
/// only its control characters escaped: all of it (`Ok`) when it fits in
/// `max` bytes, else the characters that fit (`Err`).
fn prefix_to(input: &str, max: usize, quoted: bool) -> Result<String, String> {
    let mut out = String::new();
    for c in input.chars() {
        let mut escaped = String::new();
        if c == '\'' || (!quoted && !c.is_control()) {
            // `{:?}` of a string leaves single quotes alone, as `brief`
            // leaves everything but control characters.
            escaped.push(c);
        } else {
            let _ = write!(escaped, "{}", c.escape_debug());
        }
        if out.len() + escaped.len() > max {
            return Err(out);
        }
        out.push_str(&escaped);
    }
    Ok(out)
}

/// Why a file the user named cannot be used; the caller names the file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be opened or read.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// It is not a regular file (a FIFO, a device, a directory, a socket).
    #[error("it is {kind}, not a regular file (give a regular file of at most {})", human(*limit))]
    NotRegular {
        /// What it is: "a FIFO", "a character device", ...
        kind: &'static str,
        /// The size limit, for the message.
        limit: u64,
    },
    /// It is larger than the limit (also when it grew while being read).
    #[error("it is {} ({size} bytes), over the limit of {} (give a regular file of at most {})", human(*size), human(*limit), human(*limit))]
    TooLarge {
        /// Its size in bytes: at least this (it may still be growing).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// It is not UTF-8 text.
    #[error("it is not UTF-8 text (byte {at} is not valid; give a text file)")]
    NotText {
        /// Offset of the first invalid byte.
        at: usize,
    },
}

/// A size for people: `1 MiB`, `2.5 MiB`, `512 KiB`, `100 bytes`.
fn human(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    let unit = |n: u64, u: u64, name: &str| {
        if n.is_multiple_of(u) {
            format!("{} {name}", n / u)
        } else {
            format!("{:.1} {name}", n as f64 / u as f64)
        }
    };
    match bytes {
        b if b >= MIB => unit(b, MIB, "MiB"),
        b if b >= KIB => unit(b, KIB, "KiB"),
        b => format!("{b} bytes"),
    }
}

/// What a file that is not regular is, for [`FileError::NotRegular`].
fn kind_of(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// The unit of a duration option: what a bare number means, and what the
/// value is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Microseconds.
    Micros,
    /// Milliseconds.
    Millis,
}

impl TimeUnit {
    fn nanos(self) -> u128 {
        match self {
            TimeUnit::Micros => 1_000,
            TimeUnit::Millis => 1_000_000,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Micros => "µs",
            TimeUnit::Millis => "ms",
        }
    }
}

/// A duration as the user writes it (`100ms`, `50us`, `50µs`, `2s`, or a
/// bare number in `unit`, the option's own), as a whole number of `unit`.
/// The error names the input and what would be valid.
pub fn duration_in(input: &str, unit: TimeUnit) -> Result<u64, String> {
    let text = input.trim();
    if let Ok(n) = text.parse::<u64>() {
        return Ok(n);
    }
    let invalid = |why: &str| {
        format!(
            "{}: {why} (a duration such as 500{u}, 100ms or 2s; a bare number is in {u})",
            quote(input),
            u = unit.symbol()
        )
    };
    let d = humantime::parse_duration(text).map_err(|_| invalid("not a duration"))?;
    let nanos = d.as_nanos();
    if nanos % unit.nanos() != 0 {
        return Err(invalid(&format!("not a whole number of {}", unit.symbol())));
    }
    u64::try_from(nanos / unit.nanos()).map_err(|_| invalid("too long"))
}

/// A latency limit in µs as the user writes it: a number more than 0
/// (`100`, `20.5`). The error names the input and what would be valid.
pub fn positive_micros(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(us) if us.is_finite() && us > 0.0 => Ok(us),
        _ => Err(format!(
            "{}: not a number of µs more than 0 (such as 100 or 20.5)",
            quote(text)
        )),
    }
}

/// A latency to explain, in whole µs from 1 µs to 10 s: a bare number in
/// µs, or with a unit (`100`, `100us`, `2ms`).
pub fn explain_micros(text: &str) -> Result<u64, String> {
    let us = duration_in(text, TimeUnit::Micros)?;
    if (1..=10_000_000).contains(&us) {
        Ok(us)
    } else {
        Err(format!(
            "{}: from 1 µs to 10 s (such as 100 or 2ms)",
            quote(text)
        ))
    }
}

/// Reads the text file at `path`, named by the user, if it is a regular
/// file of at most `limit` bytes. What it is and how large are checked
/// before it is opened (opening a FIFO blocks; opening some devices acts)
/// and again on the opened file, and it is read through a bounded
/// `take()`, so a file swapped or growing meanwhile is still refused
/// rather than read whole.
pub fn read_file(path: &Path, limit: u64) -> Result<String, FileError> {
    check(&std::fs::metadata(path)?, limit)?;
    // O_NONBLOCK: a FIFO swapped in since the check does not block the open.
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    check(&file.metadata()?, limit)?;
    let mut data = Vec::new();
    file.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(FileError::TooLarge {
            size: data.len() as u64,
            limit,
        });
    }
    String::from_utf8(data).map_err(|e| FileError::NotText {
        at: e.utf8_error().valid_up_to(),
    })
}

fn check(meta: &std::fs::Metadata, limit: u64) -> Result<(), FileError> {
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(FileError::NotRegular { kind, limit });
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    Ok(())
}

/// What a clap error says, on one line: its lines joined by `; `,
/// without the `error: ` prefix, the usage and the pointer to `--help`.
pub fn clap_said(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let lines = (rendered.lines().map(str::trim))
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
        .map(|l| l.trim_start_matches("error: "));
    // A line that ends in a colon introduces the next ("not provided:
    // <--in|--out>"): the two read as one.
    let mut said = String::new();
    for line in lines {
        if !said.is_empty() {
            said.push_str(if said.ends_with(':') { " " } else { "; " });
        }
        said.push_str(line);
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_and_bare_numbers_in_the_options_unit() {
        let ms = |t: &str| duration_in(t, TimeUnit::Millis);
        let us = |t: &str| duration_in(t, TimeUnit::Micros);
        assert_eq!(ms("1000"), Ok(1000));
        assert_eq!(ms("2s"), Ok(2000));
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(us("50us"), Ok(50));
        assert_eq!(us("50µs"), Ok(50));
        assert_eq!(us("1ms"), Ok(1000));
        assert_eq!(us("1.5ms"), Ok(1500));
        let e = ms("1500us").unwrap_err();
        assert!(e.contains("not a whole number of ms"), "{e}");
        let e = us("fast").unwrap_err();
        assert!(
            e.contains("\"fast\": not a duration") && e.contains("a bare number is in µs"),
            "{e}"
        );
        assert!(ms("-5").is_err());
    }

    #[test]
    fn latency_limits_name_the_input_and_the_valid_forms() {
        assert_eq!(positive_micros("20.5"), Ok(20.5));
        let e = positive_micros("abc").unwrap_err();
        assert!(e.starts_with("\"abc\": not a number of µs"), "{e}");
        assert!(positive_micros("0").is_err() && positive_micros("NaN").is_err());
        assert_eq!(explain_micros("100"), Ok(100));
        assert_eq!(explain_micros("2ms"), Ok(2000));
        let e = explain_micros("0x").unwrap_err();
        assert!(e.contains("\"0x\": not a duration"), "{e}");
        let e = explain_micros("0").unwrap_err();
        assert!(e.contains("from 1 µs to 10 s"), "{e}");
    }
    use proptest::prelude::*;

    #[test]
    fn short_inputs_are_quoted_whole_as_debug_quotes_them() {
        assert_eq!(quote("2-x"), "\"2-x\"");
        assert_eq!(quote("eth0\n"), "\"eth0\\n\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a\"b"), format!("{:?}", "a\"b"));
        assert_eq!(brief("0-3,8"), "0-3,8");
    }

    #[test]
    fn long_inputs_are_cut_with_their_length() {
        let list: String = (0..20_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let q = quote(&list);
        assert!(q.starts_with("\"0,1,2,3,4,5,"), "{q}");
        assert!(q.ends_with(&format!("…\" ({} bytes)", list.len())), "{q}");
        assert!(q.len() < QUOTED_BYTES + 30, "{q}");
        let b = brief(&"x".repeat(5000));
        assert_eq!(b, format!("{}… (5000 bytes)", "x".repeat(QUOTED_BYTES)));
        // Escapes count: forty newlines do not fit in forty bytes.
        let q = quote(&"\n".repeat(40));
        assert_eq!(q, format!("\"{}…\" (40 bytes)", "\\n".repeat(20)));
    }

    #[test]
    fn brief_escapes_only_control_characters() {
        assert_eq!(brief("a \"b\" \\ c\n"), "a \"b\" \\ c\\n");
    }

    proptest! {
        /// Whatever the input (any characters, any length), the quote is
        /// short, starts with the input's first characters, and names the
        /// length when it cut.
        #[test]
        fn a_quote_is_bounded_and_a_prefix(input in "\\PC{0,300}|[\\x00-\\x1f\"\\\\]{0,300}", repeat in 1usize..400) {
            let input = input.repeat(repeat);
            let q = quote(&input);
            prop_assert!(q.len() <= QUOTED_BYTES + 2 + "… (18446744073709551615 bytes)".len(), "{}", q);
            let whole = format!("{input:?}");
            if whole.len() <= QUOTED_BYTES + 2 {
                prop_assert_eq!(q, whole);
            } else {
                let cut = q.rsplit_once("…\" (").expect("cut").0;
                prop_assert!(whole.starts_with(cut), "{} is not a prefix of {}", cut, whole);
                let len = format!("({} bytes)", input.len());
                prop_assert!(q.ends_with(&len), "{}", q);
            }
        }
    }

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "cpus = \"2\"\n").unwrap();
        assert_eq!(read_file(&path, 100).unwrap(), "cpus = \"2\"\n");
        let e = read_file(&path, 4).unwrap_err();
        assert!(
            matches!(e, FileError::TooLarge { size: 11, limit: 4 }),
            "{e}"
        );
        assert!(e.to_string().contains("11 bytes"), "{e}");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading_them() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (path, kind) in [
            (Path::new("/dev/zero"), "a character device"),
            (fifo.as_path(), "a FIFO"),
            (dir.path(), "a directory"),
        ] {
            let e = read_file(path, CONFIG_LIMIT).unwrap_err();
            assert!(
                matches!(e, FileError::NotRegular { kind: k, .. } if k == kind),
                "{path:?}: {e}"
            );
            assert!(
                e.to_string().contains("not a regular file")
                    && e.to_string().contains("at most 1 MiB"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_file_over_the_limit_is_refused_with_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        std::fs::write(&path, vec![b'#'; 2 << 20]).unwrap();
        let e = read_file(&path, CONFIG_LIMIT).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is 2 MiB (2097152 bytes), over the limit of 1 MiB (give a regular file of at most 1 MiB)"
        );
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_file(&path, CONFIG_LIMIT),
            Err(FileError::NotText { at: 0 })
        ));
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human(100), "100 bytes");
        assert_eq!(human(1 << 20), "1 MiB");
        assert_eq!(human(3 << 19), "1.5 MiB");
        assert_eq!(human(4096), "4 KiB");
    }
}

/// A length of time in seconds as `measure`, `compare` and `certify` take
/// it: a number of seconds (`90`, `0.5`), or a number with `s`, `m`, `h`
/// or `d` (`90s`, `10m`, `2h`, `1d`); `None` when it is neither or not a
/// finite number.
pub fn seconds(text: &str) -> Option<f64> {
    let t = text.trim();
    let (number, scale) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'd')) => (&t[..i], 86_400.0),
        _ => (t, 1.0),
    };
    let n = number.trim().parse::<f64>().ok()?;
    (n.is_finite()).then_some(n * scale)
}

/// [`seconds`] for a command-line option: more than 0, or an error that
/// names the valid forms.
pub fn positive_seconds(text: &str) -> Result<f64, String> {
    match seconds(text) {
        Some(s) if s > 0.0 => Ok(s),
        _ => Err(format!(
            "{text:?}: give seconds or a number with s, m, h or d (90, 90s, 10m, 2h, 1d), more than 0"
        )),
    }
}

#[cfg(test)]
mod seconds_tests {
    use super::*;

    #[test]
    fn one_duration_syntax_for_measure_compare_and_certify() {
        assert_eq!(seconds("90"), Some(90.0));
        assert_eq!(seconds("90s"), Some(90.0));
        assert_eq!(seconds("10m"), Some(600.0));
        assert_eq!(seconds("2h"), Some(7200.0));
        assert_eq!(seconds("1d"), Some(86_400.0));
        assert_eq!(seconds("0.5"), Some(0.5));
        assert_eq!(seconds("10x"), None);
        assert_eq!(seconds("nan"), None);
        assert!(positive_seconds("0").unwrap_err().contains("10m"));
    }
}
