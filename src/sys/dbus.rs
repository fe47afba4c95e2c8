//! One property of systemd's manager read over D-Bus, with no client
//! process: `status` and the healer's repair read systemd's manager
//! environment (irqbalance's ban) each time, and a `systemctl` started for
//! it cost 0.27-0.33 s of a 1.1 s `status` in the emulated Debian 12
//! guest, where this read takes milliseconds.
//!
//! Written here rather than taken from a D-Bus crate: it is one method
//! call (`org.freedesktop.DBus.Properties.Get`) on systemd's private
//! socket (`/run/systemd/private`, root only, a direct connection to PID 1
//! with no bus daemon and no `Hello`), and its answer of one type (`as`,
//! `s` or `u`). zbus, the maintained pure-Rust client, brings an async
//! runtime and some forty crates to a build whose CI time is counted; the
//! C `libdbus` breaks the static release build. Anything that goes wrong
//! here is an error, and the caller falls back to systemd's own client.
//!
//! systemd's sd-bus may take the call in with the handshake's last line
//! and then not look at it until more comes on the socket (seen with
//! systemd 252 under emulation: the call sent with `BEGIN` waited for
//! the client's timeout nearly every time), so the client pings until the
//! answer comes.
//!
//! The wire format is the D-Bus specification's: the SASL `EXTERNAL`
//! handshake with the uid in hex, then a message whose fixed header is
//! 12 bytes, whose header fields are an array of (code, variant) structs
//! aligned to 8, and whose body is aligned to 8 after them.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// systemd's private socket, relative to the root.
pub const SYSTEMD_PRIVATE: &str = "run/systemd/private";
/// systemd's manager object.
pub const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
/// The manager's interface.
pub const MANAGER_INTERFACE: &str = "org.freedesktop.systemd1.Manager";

/// How long one read waits for systemd, which answers in milliseconds
/// unless it is busy (a `daemon-reload`): then the client's way is as slow.
const WAIT: Duration = Duration::from_secs(5);

/// How long a call waits for its answer before it pings (see
/// [`get_property`]); each wait after a ping is twice the last, up to
/// [`NUDGE_MAX`].
const NUDGE: Duration = Duration::from_millis(5);
const NUDGE_MAX: Duration = Duration::from_millis(100);

/// Whether `stream` has something to read within `timeout`.
fn readable(stream: &UnixStream, timeout: Duration) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A property's value, of the types read here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `s`, `o` or `g`.
    Str(String),
    /// `as`.
    Strings(Vec<String>),
    /// `u`.
    U32(u32),
}

/// Reads `interface`'s property `name` of object `path` over the private
/// socket at `socket` (an absolute path), as uid `uid`.
pub fn get_property(
    socket: &std::path::Path,
    uid: u32,
    (path, interface, name): (&str, &str, &str),
) -> io::Result<Value> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(WAIT))?;
    stream.set_write_timeout(Some(WAIT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    authenticate(&mut reader, &mut writer, uid)?;
    writer.write_all(&method_call(1, path, interface, name))?;
    let started = Instant::now();
    let mut serial = 1;
    let mut nudge = NUDGE;
    loop {
        // sd-bus (seen with systemd 252) may read the call with the
        // `BEGIN` before it runs, and leave it unread until more comes on
        // the socket: a ping after [`NUDGE`], and after twice as long each time, makes it
        // look again.
        while reader.buffer().is_empty() && !readable(reader.get_ref(), nudge)? {
            if started.elapsed() >= WAIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "systemd did not answer over its private socket",
                ));
            }
            serial += 1;
            writer.write_all(&ping(serial))?;
            nudge = (nudge * 2).min(NUDGE_MAX);
        }
        let message = read_message(&mut reader)?;
        match (message.kind, message.reply_serial) {
            (METHOD_RETURN, Some(1)) => return parse_variant(&message),
            (ERROR, Some(1)) => {
                let text = parse_error(&message);
                return Err(io::Error::other(format!("systemd answered {text}")));
            }
            // A signal or anything else not ours: read on.
            _ => continue,
        }
    }
}

/// The SASL handshake: a nul byte, `AUTH EXTERNAL <uid as hex of its
/// decimal digits>`, `OK <guid>` back, `BEGIN`.
fn authenticate(reader: &mut impl BufRead, writer: &mut impl Write, uid: u32) -> io::Result<()> {
    let hex: String = uid
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    writer.write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if !line.starts_with("OK ") {
        return Err(io::Error::other(format!(
            "systemd refused the connection: {:?}",
            line.trim_end()
        )));
    }
    writer.write_all(b"BEGIN\r\n")
}

const METHOD_CALL: u8 = 1;
const METHOD_RETURN: u8 = 2;
const ERROR: u8 = 3;
/// Header field codes.
const FIELD_PATH: u8 = 1;
const FIELD_INTERFACE: u8 = 2;
const FIELD_MEMBER: u8 = 3;
const FIELD_ERROR_NAME: u8 = 4;
const FIELD_REPLY_SERIAL: u8 = 5;
const FIELD_DESTINATION: u8 = 6;
const FIELD_SIGNATURE: u8 = 8;

/// A message being written, little-endian.
struct Writer(Vec<u8>);

impl Writer {
    fn pad(&mut self, to: usize) {
        while !self.0.len().is_multiple_of(to) {
            self.0.push(0);
        }
    }
    fn u32(&mut self, v: u32) {
        self.pad(4);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    fn signature(&mut self, s: &str) {
        self.0.push(s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    /// A header field: (code, variant of type `kind` holding `value`).
    fn field(&mut self, code: u8, kind: &str, value: &str) {
        self.pad(8);
        self.0.push(code);
        self.signature(kind);
        match kind {
            "g" => self.signature(value),
            _ => self.string(value),
        }
    }
}

/// `org.freedesktop.DBus.Properties.Get(interface, name)` on `path` of
/// systemd, as serial `serial`.
fn method_call(serial: u32, path: &str, interface: &str, name: &str) -> Vec<u8> {
    let mut body = Writer(Vec::new());
    body.string(interface);
    body.string(name);
    let mut fields = Writer(Vec::new());
    fields.field(FIELD_PATH, "o", path);
    fields.field(FIELD_INTERFACE, "s", "org.freedesktop.DBus.Properties");
    fields.field(FIELD_MEMBER, "s", "Get");
    fields.field(FIELD_DESTINATION, "s", "org.freedesktop.systemd1");
    fields.field(FIELD_SIGNATURE, "g", "ss");
    message(serial, &fields, &body)
}

/// `org.freedesktop.DBus.Peer.Ping()`, which every peer answers, as
/// serial `serial`.
fn ping(serial: u32) -> Vec<u8> {
    let mut fields = Writer(Vec::new());
    fields.field(FIELD_PATH, "o", "/");
    fields.field(FIELD_INTERFACE, "s", "org.freedesktop.DBus.Peer");
    fields.field(FIELD_MEMBER, "s", "Ping");
    fields.field(FIELD_DESTINATION, "s", "org.freedesktop.systemd1");
    message(serial, &fields, &Writer(Vec::new()))
}

/// A method call of header `fields` and `body`, as serial `serial`.
fn message(serial: u32, fields: &Writer, body: &Writer) -> Vec<u8> {
    let mut out = Writer(vec![b'l', METHOD_CALL, 0, 1]);
    out.u32(body.0.len() as u32);
    out.u32(serial);
    out.u32(fields.0.len() as u32);
    // The fields start at offset 16, a multiple of 8, so their own
    // padding (relative to their start) is the message's.
    out.0.extend_from_slice(&fields.0);
    out.pad(8);
    out.0.extend_from_slice(&body.0);
    out.0
}

/// A message read: its type, the serial it answers, its signature and
/// body, and its byte order.
#[derive(Debug)]
struct Message {
    kind: u8,
    reply_serial: Option<u32>,
    error_name: Option<String>,
    signature: String,
    body: Vec<u8>,
    big_endian: bool,
}

/// The longest message read: systemd's environment is a few kB.
const MAX_MESSAGE: usize = 1 << 20;

fn read_message(reader: &mut impl Read) -> io::Result<Message> {
    let mut fixed = [0u8; 16];
    reader.read_exact(&mut fixed)?;
    let big_endian = match fixed[0] {
        b'l' => false,
        b'B' => true,
        other => return Err(bad(format!("byte order {other:#04x}"))),
    };
    let word = |at: usize| {
        let b = [fixed[at], fixed[at + 1], fixed[at + 2], fixed[at + 3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let body_len = word(4) as usize;
    let fields_len = word(12) as usize;
    let padded = fields_len.div_ceil(8) * 8;
    if body_len + padded > MAX_MESSAGE {
        return Err(bad(format!("a message of {} bytes", body_len + padded)));
    }
    let mut rest = vec![0u8; padded + body_len];
    reader.read_exact(&mut rest)?;
    let body = rest.split_off(padded);
    let mut message = Message {
        kind: fixed[1],
        reply_serial: None,
        error_name: None,
        signature: String::new(),
        body,
        big_endian,
    };
    // The fields, as at offset 16 of the message (a multiple of 8).
    let mut r = Reader::new(&rest[..fields_len], big_endian);
    while r.at < fields_len {
        r.align(8)?;
        let code = r.byte()?;
        let kind = r.signature()?;
        match kind.as_str() {
            "u" => {
                let v = r.u32()?;
                if code == FIELD_REPLY_SERIAL {
                    message.reply_serial = Some(v);
                }
            }
            "g" => {
                let v = r.signature()?;
                if code == FIELD_SIGNATURE {
                    message.signature = v;
                }
            }
            "s" | "o" => {
                let v = r.string()?;
                if code == FIELD_ERROR_NAME {
                    message.error_name = Some(v);
                }
            }
            other => return Err(bad(format!("a header field of type {other:?}"))),
        }
    }
    Ok(message)
}

/// The value of a `Get` reply: its body is one variant.
fn parse_variant(message: &Message) -> io::Result<Value> {
    if message.signature != "v" {
        return Err(bad(format!("a reply of signature {:?}", message.signature)));
    }
    let mut r = Reader::new(&message.body, message.big_endian);
    match r.signature()?.as_str() {
        "s" | "o" => Ok(Value::Str(r.string()?)),
        "g" => Ok(Value::Str(r.signature()?)),
        "u" => Ok(Value::U32(r.u32()?)),
        "as" => {
            let len = r.u32()? as usize;
            let end = r.at + len;
            let mut out = Vec::new();
            while r.at < end {
                out.push(r.string()?);
            }
            Ok(Value::Strings(out))
        }
        other => Err(bad(format!("a property of type {other:?}"))),
    }
}

/// An error reply's name and first string.
fn parse_error(message: &Message) -> String {
    let name = message.error_name.clone().unwrap_or_default();
    let text = (message.signature.starts_with('s'))
        .then(|| Reader::new(&message.body, message.big_endian).string().ok())
        .flatten()
        .unwrap_or_default();
    format!("{name}: {text}")
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("D-Bus: {what}"))
}

/// Reads values from a byte slice whose offset 0 is aligned to 8.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    big_endian: bool,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], big_endian: bool) -> Reader<'a> {
        Reader {
            bytes,
            at: 0,
            big_endian,
        }
    }
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| bad("a message cut short".into()))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn align(&mut self, to: usize) -> io::Result<()> {
        let pad = (to - self.at % to) % to;
        self.take(pad).map(|_| ())
    }
    fn byte(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> io::Result<u32> {
        self.align(4)?;
        let b: [u8; 4] = self.take(4)?.try_into().expect("4 bytes");
        Ok(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
    fn text(&mut self, len: usize) -> io::Result<String> {
        let bytes = self.take(len)?;
        let nul = self.byte()?;
        if nul != 0 {
            return Err(bad("a string without its nul".into()));
        }
        String::from_utf8(bytes.to_vec()).map_err(|_| bad("a string not in UTF-8".into()))
    }
    fn string(&mut self) -> io::Result<String> {
        let len = self.u32()? as usize;
        self.text(len)
    }
    fn signature(&mut self) -> io::Result<String> {
        let len = self.byte()? as usize;
        self.text(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply as systemd writes it: header fields REPLY_SERIAL,
    /// DESTINATION, SIGNATURE "v", SENDER-less (the private socket).
    fn reply(big_endian: bool, serial: u32, body: &[u8], signature: &str) -> Vec<u8> {
        let w = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut fields = Vec::new();
        // REPLY_SERIAL: code 5, signature "u", the serial (aligned to 4).
        fields.extend_from_slice(&[FIELD_REPLY_SERIAL, 1, b'u', 0]);
        fields.extend_from_slice(&w(serial));
        // SIGNATURE: code 8, "g", the body's signature.
        fields.extend_from_slice(&[FIELD_SIGNATURE, 1, b'g', 0, signature.len() as u8]);
        fields.extend_from_slice(signature.as_bytes());
        fields.push(0);
        let mut out = vec![if big_endian { b'B' } else { b'l' }, METHOD_RETURN, 1, 1];
        out.extend_from_slice(&w(body.len() as u32));
        out.extend_from_slice(&w(7));
        out.extend_from_slice(&w(fields.len() as u32));
        out.extend_from_slice(&fields);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        out.extend_from_slice(body);
        out
    }

    /// The body of a variant `as`: signature, array length, each string
    /// aligned to 4 (offsets from the body's start, which is aligned).
    fn strings_variant(big_endian: bool, strings: &[&str]) -> Vec<u8> {
        let w = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut out = vec![2, b'a', b's', 0];
        let mut array = Vec::new();
        for s in strings {
            while !(array.len() + 8).is_multiple_of(4) {
                array.push(0);
            }
            array.extend_from_slice(&w(s.len() as u32));
            array.extend_from_slice(s.as_bytes());
            array.push(0);
        }
        out.extend_from_slice(&w(array.len() as u32));
        out.extend_from_slice(&array);
        out
    }

    #[test]
    fn a_get_reply_of_strings_reads_in_either_byte_order() {
        let env = [
            "LANG=C.UTF-8",
            "PATH=/usr/bin",
            "IRQBALANCE_BANNED_CPULIST=2-3",
        ];
        for big in [false, true] {
            let bytes = reply(big, 1, &strings_variant(big, &env), "v");
            let message = read_message(&mut bytes.as_slice()).unwrap();
            assert_eq!(message.reply_serial, Some(1));
            assert_eq!(
                parse_variant(&message).unwrap(),
                Value::Strings(env.iter().map(|s| s.to_string()).collect())
            );
        }
    }

    #[test]
    fn a_reply_cut_short_or_of_another_type_is_an_error_not_a_value() {
        let body = strings_variant(false, &["A=1", "B=2"]);
        let bytes = reply(false, 1, &body, "v");
        for cut in [10, 20, bytes.len() - 3] {
            assert!(read_message(&mut &bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A body that says its array runs past the message.
        let mut long = body.clone();
        long[4] = 200;
        let message = read_message(&mut reply(false, 1, &long, "v").as_slice()).unwrap();
        assert!(parse_variant(&message).is_err());
        let message = read_message(&mut reply(false, 1, &body, "as").as_slice()).unwrap();
        assert!(parse_variant(&message).is_err());
    }

    #[test]
    fn the_call_is_laid_out_as_the_specification_says() {
        let call = method_call(1, MANAGER_PATH, MANAGER_INTERFACE, "Environment");
        assert_eq!(&call[..4], &[b'l', METHOD_CALL, 0, 1]);
        let body_len = u32::from_le_bytes(call[4..8].try_into().unwrap()) as usize;
        let fields_len = u32::from_le_bytes(call[12..16].try_into().unwrap()) as usize;
        let body_at = (16 + fields_len).div_ceil(8) * 8;
        assert_eq!(call.len(), body_at + body_len);
        // Read back with the reader: the fields and the body's two strings.
        let mut r = Reader::new(&call[16..16 + fields_len], false);
        let mut fields = Vec::new();
        while r.at < fields_len {
            r.align(8).unwrap();
            let code = r.byte().unwrap();
            let kind = r.signature().unwrap();
            let value = if kind == "g" {
                r.signature().unwrap()
            } else {
                r.string().unwrap()
            };
            fields.push((code, kind, value));
        }
        assert_eq!(
            fields,
            [
                (FIELD_PATH, "o".into(), MANAGER_PATH.into()),
                (
                    FIELD_INTERFACE,
                    "s".into(),
                    "org.freedesktop.DBus.Properties".into()
                ),
                (FIELD_MEMBER, "s".into(), "Get".into()),
                (
                    FIELD_DESTINATION,
                    "s".into(),
                    "org.freedesktop.systemd1".into()
                ),
                (FIELD_SIGNATURE, "g".into(), "ss".into()),
            ]
        );
        let mut body = Reader::new(&call[body_at..], false);
        assert_eq!(body.string().unwrap(), MANAGER_INTERFACE);
        assert_eq!(body.string().unwrap(), "Environment");
    }

    #[test]
    fn the_handshake_sends_the_uid_as_hex_of_its_digits_and_needs_ok() {
        let mut sent = Vec::new();
        authenticate(&mut &b"OK 1234deadbeef\r\n"[..], &mut sent, 0).unwrap();
        assert_eq!(sent, b"\0AUTH EXTERNAL 30\r\nBEGIN\r\n");
        let mut sent = Vec::new();
        let refused = authenticate(&mut &b"REJECTED EXTERNAL\r\n"[..], &mut sent, 1000);
        assert!(refused.unwrap_err().to_string().contains("REJECTED"));
        assert!(sent.starts_with(b"\0AUTH EXTERNAL 31303030\r\n"));
    }

    #[test]
    fn a_server_that_leaves_the_call_unread_until_more_comes_is_pinged_into_answering() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("private");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut line = Vec::new();
            reader.read_until(b'\n', &mut line).unwrap();
            assert!(line.starts_with(b"\0AUTH EXTERNAL "));
            writer.write_all(b"OK 0123456789abcdef\r\n").unwrap();
            line.clear();
            reader.read_until(b'\n', &mut line).unwrap();
            assert_eq!(line, b"BEGIN\r\n");
            let call = read_message(&mut reader).unwrap();
            assert_eq!(call.kind, METHOD_CALL);
            // As sd-bus does: nothing until another message comes.
            let ping = read_message(&mut reader).unwrap();
            assert_eq!(ping.kind, METHOD_CALL);
            let body = strings_variant(false, &["IRQBALANCE_BANNED_CPULIST=2-3"]);
            writer.write_all(&reply(false, 2, &[], "")).unwrap();
            writer.write_all(&reply(false, 1, &body, "v")).unwrap();
        });
        let property = (MANAGER_PATH, MANAGER_INTERFACE, "Environment");
        let started = Instant::now();
        let value = get_property(&socket, 0, property).unwrap();
        assert_eq!(
            value,
            Value::Strings(vec!["IRQBALANCE_BANNED_CPULIST=2-3".into()])
        );
        assert!(
            started.elapsed() < WAIT,
            "answered after a ping, not a timeout"
        );
        server.join().unwrap();
    }

    #[test]
    fn an_error_reply_says_its_name() {
        let mut body = Vec::new();
        let text = "Unknown property";
        body.extend_from_slice(&(text.len() as u32).to_le_bytes());
        body.extend_from_slice(text.as_bytes());
        body.push(0);
        let message = Message {
            kind: ERROR,
            reply_serial: Some(1),
            error_name: Some("org.freedesktop.DBus.Error.UnknownProperty".into()),
            signature: "s".into(),
            body,
            big_endian: false,
        };
        assert_eq!(
            parse_error(&message),
            "org.freedesktop.DBus.Error.UnknownProperty: Unknown property"
        );
    }
}
