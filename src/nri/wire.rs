//! The bytes between the runtime and the plugin: NRI's multiplexer, which
//! carries two connections over the one unix stream the plugin dials
//! (containerd/nri `pkg/net/multiplex`), and ttrpc's messages on each
//! (containerd/ttrpc `PROTOCOL.md`).
//!
//! A multiplexer frame is a big-endian u32 connection id, a big-endian u32
//! payload length, then the payload; a connection's payloads, in order,
//! are its byte stream. On connection [`PLUGIN_CONN`] the runtime calls
//! and the plugin answers; on [`RUNTIME_CONN`] the plugin calls. A ttrpc
//! message is a 10-byte header (u32 length, u32 stream id, u8 type, u8
//! flags) and a protobuf envelope.

use std::collections::HashMap;
use std::io::{self, Read, Write};

/// The connection the plugin serves.
pub const PLUGIN_CONN: u32 = 1;
/// The connection the plugin calls the runtime on.
pub const RUNTIME_CONN: u32 = 2;
/// The largest multiplexer payload accepted (the runtime's own bound).
pub const MAX_FRAME: usize = 4 * 1024 * 1024 + 10;
/// The largest payload the plugin sends in one frame: the runtime reads a
/// frame at a time into a buffer of this size.
pub const SEND_FRAME: usize = 4096;
/// The largest ttrpc message accepted (ttrpc's default limit).
pub const MAX_MESSAGE: usize = 4 << 20;

/// ttrpc's message type of a request.
pub const REQUEST: u8 = 1;
/// ttrpc's message type of a response.
pub const RESPONSE: u8 = 2;

/// One ttrpc message, read or to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The multiplexer connection it travels on.
    pub conn: u32,
    /// ttrpc's stream id: a request's, odd, chosen by the caller; its
    /// response carries the same.
    pub stream: u32,
    /// [`REQUEST`], [`RESPONSE`] or another type (answered by no one).
    pub kind: u8,
    /// The protobuf envelope.
    pub body: Vec<u8>,
}

/// Reads ttrpc messages off the multiplexed stream.
#[derive(Debug, Default)]
pub struct Reader {
    pending: HashMap<u32, Vec<u8>>,
}

impl Reader {
    /// The next whole message, reading frames from `from` as needed; an
    /// error on a closed stream or one that breaks the framing rules.
    pub fn next(&mut self, from: &mut impl Read) -> io::Result<Message> {
        loop {
            if let Some(m) = self.take() {
                return m;
            }
            let mut header = [0u8; 8];
            from.read_exact(&mut header)?;
            let conn = u32::from_be_bytes(header[..4].try_into().expect("4 bytes"));
            let len = u32::from_be_bytes(header[4..].try_into().expect("4 bytes")) as usize;
            if len > MAX_FRAME {
                return Err(invalid(format!(
                    "a frame of {len} bytes on connection {conn} (at most {MAX_FRAME})"
                )));
            }
            let mut payload = vec![0u8; len];
            from.read_exact(&mut payload)?;
            self.pending.entry(conn).or_default().extend(payload);
        }
    }

    /// A whole message waiting on some connection, if any.
    fn take(&mut self) -> Option<io::Result<Message>> {
        for (&conn, bytes) in self.pending.iter_mut() {
            if bytes.len() < 10 {
                continue;
            }
            let len = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
            if len > MAX_MESSAGE {
                return Some(Err(invalid(format!(
                    "a ttrpc message of {len} bytes on connection {conn} (at most {MAX_MESSAGE})"
                ))));
            }
            if bytes.len() < 10 + len {
                continue;
            }
            let stream = u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes"));
            let kind = bytes[8];
            let body = bytes[10..10 + len].to_vec();
            bytes.drain(..10 + len);
            return Some(Ok(Message {
                conn,
                stream,
                kind,
                body,
            }));
        }
        None
    }
}

/// Writes `m` to `to`, in frames of at most [`SEND_FRAME`] bytes.
pub fn write(to: &mut impl Write, m: &Message) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(10 + m.body.len());
    bytes.extend((m.body.len() as u32).to_be_bytes());
    bytes.extend(m.stream.to_be_bytes());
    bytes.push(m.kind);
    bytes.push(0);
    bytes.extend(&m.body);
    let mut out = Vec::with_capacity(bytes.len() + 8 * (bytes.len() / SEND_FRAME + 1));
    for chunk in bytes.chunks(SEND_FRAME) {
        out.extend(m.conn.to_be_bytes());
        out.extend((chunk.len() as u32).to_be_bytes());
        out.extend(chunk);
    }
    to.write_all(&out)?;
    to.flush()
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(conn: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = conn.to_be_bytes().to_vec();
        f.extend((payload.len() as u32).to_be_bytes());
        f.extend(payload);
        f
    }

    #[test]
    fn a_message_split_over_frames_and_interleaved_with_another_connection_is_read_whole() {
        let a = Message {
            conn: PLUGIN_CONN,
            stream: 3,
            kind: REQUEST,
            body: (0..9000u32).map(|i| i as u8).collect(),
        };
        let mut sent = Vec::new();
        write(&mut sent, &a).unwrap();
        // written in frames no larger than the runtime's buffer
        let mut at = 0;
        let mut frames = Vec::new();
        while at < sent.len() {
            let len = u32::from_be_bytes(sent[at + 4..at + 8].try_into().unwrap()) as usize;
            assert!(len <= SEND_FRAME, "a frame of {len} bytes");
            frames.push(sent[at..at + 8 + len].to_vec());
            at += 8 + len;
        }
        assert_eq!(frames.len(), 3);
        // a short message of the other connection between the frames
        let mut b = Vec::new();
        write(
            &mut b,
            &Message {
                conn: RUNTIME_CONN,
                stream: 1,
                kind: RESPONSE,
                body: vec![7, 7],
            },
        )
        .unwrap();
        let mut stream = frames[0].clone();
        stream.extend(&b);
        stream.extend(frames[1..].concat());
        let mut r = Reader::default();
        let mut input = &stream[..];
        let first = r.next(&mut input).unwrap();
        assert_eq!(
            (first.conn, first.stream, first.body),
            (RUNTIME_CONN, 1, vec![7, 7])
        );
        assert_eq!(r.next(&mut input).unwrap(), a);
        assert!(r.next(&mut input).is_err(), "the stream ended");
    }

    #[test]
    fn two_messages_in_one_frame_are_both_read() {
        let mut payload = Vec::new();
        for (stream, body) in [(1u32, vec![1u8]), (3, vec![2, 2])] {
            payload.extend((body.len() as u32).to_be_bytes());
            payload.extend(stream.to_be_bytes());
            payload.extend([REQUEST, 0]);
            payload.extend(body);
        }
        let bytes = frame(PLUGIN_CONN, &payload);
        let mut r = Reader::default();
        let mut input = &bytes[..];
        assert_eq!(r.next(&mut input).unwrap().body, vec![1]);
        assert_eq!(r.next(&mut input).unwrap().body, vec![2, 2]);
    }

    #[test]
    fn an_oversized_frame_or_message_is_refused_not_allocated() {
        let mut bytes = PLUGIN_CONN.to_be_bytes().to_vec();
        bytes.extend(u32::MAX.to_be_bytes());
        let e = Reader::default().next(&mut &bytes[..]).unwrap_err();
        assert!(e.to_string().contains("a frame of 4294967295 bytes"), "{e}");
        let mut header = (u32::MAX).to_be_bytes().to_vec();
        header.extend([0, 0, 0, 1, REQUEST, 0]);
        let bytes = frame(PLUGIN_CONN, &header);
        let e = Reader::default().next(&mut &bytes[..]).unwrap_err();
        assert!(e.to_string().contains("a ttrpc message of"), "{e}");
    }
}
