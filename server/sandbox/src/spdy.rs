//! SPDY/3.1 framing, as much of it as a `pods/portforward` server needs:
//! the frames kubectl's SPDY library (moby/spdystream, spoken over an HTTP
//! upgrade or tunnelled through a WebSocket, KEP-4006) sends and expects.
//! Header blocks are one zlib stream per direction, primed with SPDY/3's
//! dictionary. Written here because no maintained Rust crate speaks SPDY:
//! it was superseded by HTTP/2 everywhere but in Kubernetes' streaming.
//! spdystream does no flow control, so WINDOW_UPDATE and SETTINGS are read
//! and ignored, as it does.

use std::sync::LazyLock;

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// A frame's fixed header: 8 bytes.
const HEADER: usize = 8;
/// The largest frame the sandbox accepts: header blocks are small and
/// spdystream writes data in 32 KiB pieces.
pub(crate) const MAX_FRAME: usize = 1 << 20;
/// The largest header block, decompressed.
const MAX_HEADERS: usize = 64 * 1024;
const FLAG_FIN: u8 = 0x01;
const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
/// RST_STREAM's status for a stream the server will not serve.
pub(crate) const REFUSED_STREAM: u32 = 3;

/// SPDY/3's header compression dictionary (draft 3.1, section 2.6.10.1):
/// length-prefixed words, then a run of common values. kubectl primes its
/// zlib stream with it; a stream primed with anything else fails to inflate.
static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const VALUES: &str = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";
    let mut dictionary = Vec::with_capacity(1423);
    for word in WORDS {
        dictionary.extend_from_slice(&(word.len() as u32).to_be_bytes());
        dictionary.extend_from_slice(word.as_bytes());
    }
    dictionary.extend_from_slice(VALUES.as_bytes());
    dictionary
});

/// A frame from the client, as the server acts on it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A new stream, with its headers (names lower-cased, as SPDY sends them).
    SynStream {
        stream: u32,
        fin: bool,
        headers: Vec<(String, String)>,
    },
    Data {
        stream: u32,
        fin: bool,
        data: Bytes,
    },
    RstStream {
        stream: u32,
    },
    Ping(u32),
    GoAway,
    /// SETTINGS, WINDOW_UPDATE, HEADERS, a SYN_REPLY: nothing to do.
    Ignored,
}

/// Why a connection's bytes are not SPDY/3.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ProtocolError(String);

fn protocol(why: impl Into<String>) -> ProtocolError {
    ProtocolError(why.into())
}

/// Reads frames from a connection's bytes, which may arrive in any pieces.
pub(crate) struct Decoder {
    buf: BytesMut,
    inflate: Decompress,
}

impl Default for Decoder {
    fn default() -> Self {
        Self {
            buf: BytesMut::new(),
            inflate: Decompress::new(true),
        }
    }
}

impl Decoder {
    /// Adds bytes read from the connection.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, if one has arrived.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Frame>, ProtocolError> {
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        let length = usize::from(self.buf[5]) << 16 | usize::from(self.buf[6]) << 8 | usize::from(self.buf[7]);
        if length > MAX_FRAME {
            return Err(protocol(format!("a frame of {length} bytes (at most {MAX_FRAME})")));
        }
        if self.buf.len() < HEADER + length {
            return Ok(None);
        }
        let mut frame = self.buf.split_to(HEADER + length).freeze();
        let word = frame.get_u32();
        let flags = frame.get_u8();
        frame.advance(3);
        let fin = flags & FLAG_FIN != 0;
        if word & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data {
                stream: word,
                fin,
                data: frame,
            }));
        }
        let version = (word >> 16) as u16 & 0x7fff;
        if version != VERSION {
            return Err(protocol(format!("SPDY version {version} (this is SPDY/3.1)")));
        }
        let short = |need: usize| {
            (length < need).then(|| protocol(format!("a control frame of type {} too short", word & 0xffff)))
        };
        match word as u16 {
            SYN_STREAM => {
                if let Some(e) = short(10) {
                    return Err(e);
                }
                let stream = frame.get_u32() & 0x7fff_ffff;
                frame.advance(6);
                let headers = self.headers(&frame)?;
                Ok(Some(Frame::SynStream { stream, fin, headers }))
            }
            RST_STREAM => match short(8) {
                Some(e) => Err(e),
                None => Ok(Some(Frame::RstStream {
                    stream: frame.get_u32() & 0x7fff_ffff,
                })),
            },
            PING => match short(4) {
                Some(e) => Err(e),
                None => Ok(Some(Frame::Ping(frame.get_u32()))),
            },
            GOAWAY => Ok(Some(Frame::GoAway)),
            _ => Ok(Some(Frame::Ignored)),
        }
    }

    /// Inflates one header block (the stream goes on across blocks) and
    /// reads its name/value pairs.
    fn headers(&mut self, compressed: &[u8]) -> Result<Vec<(String, String)>, ProtocolError> {
        let mut out = Vec::with_capacity(1024);
        let mut input = compressed;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= MAX_HEADERS {
                    return Err(protocol(format!("a header block over {MAX_HEADERS} bytes")));
                }
                out.reserve(out.len());
            }
            let (before, written) = (self.inflate.total_in(), out.len());
            let primed = match self.inflate.decompress_vec(input, &mut out, FlushDecompress::Sync) {
                Ok(Status::Ok | Status::BufError) => false,
                Ok(Status::StreamEnd) => return Err(protocol("a header stream that ended")),
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&DICTIONARY)
                        .map_err(|e| protocol(format!("the header dictionary: {e}")))?;
                    true
                }
                Err(e) => return Err(protocol(format!("a header block does not inflate: {e}"))),
            };
            let used = usize::try_from(self.inflate.total_in() - before).unwrap_or(input.len());
            input = &input[used.min(input.len())..];
            // Done once the block is read and inflate had room to spare.
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
            if used == 0 && out.len() == written && out.len() < out.capacity() && !primed {
                return Err(protocol("a header block that does not inflate"));
            }
        }
        parse_headers(&out)
    }
}

fn parse_headers(mut block: &[u8]) -> Result<Vec<(String, String)>, ProtocolError> {
    let take = |block: &mut &[u8]| -> Result<String, ProtocolError> {
        if block.len() < 4 {
            return Err(protocol("a truncated header block"));
        }
        let n = block.get_u32() as usize;
        if block.len() < n {
            return Err(protocol("a truncated header block"));
        }
        let (text, rest) = block.split_at(n);
        *block = rest;
        String::from_utf8(text.to_vec()).map_err(|_| protocol("a header that is not UTF-8"))
    };
    if block.len() < 4 {
        return Err(protocol("a truncated header block"));
    }
    let count = block.get_u32();
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = take(&mut block)?.to_ascii_lowercase();
        let value = take(&mut block)?;
        headers.push((name, value));
    }
    Ok(headers)
}

/// Writes the server's frames; replies share one compression stream.
pub(crate) struct Encoder {
    deflate: Compress,
}

impl Default for Encoder {
    fn default() -> Self {
        let mut deflate = Compress::new(Compression::default(), true);
        // zlib-rs primes any stream; the error case cannot happen before
        // the first byte is compressed.
        let _ = deflate.set_dictionary(&DICTIONARY);
        Self { deflate }
    }
}

impl Encoder {
    /// SYN_REPLY with no headers: the stream is accepted.
    pub(crate) fn syn_reply(&mut self, stream: u32) -> Bytes {
        let block = self.compress(&0u32.to_be_bytes());
        let mut out = control(SYN_REPLY, 0, 4 + block.len());
        out.put_u32(stream);
        out.extend_from_slice(&block);
        out.freeze()
    }

    fn compress(&mut self, raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input = raw;
        loop {
            let before = self.deflate.total_in();
            let _ = self.deflate.compress_vec(input, &mut out, FlushCompress::Sync);
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(input.len());
            input = &input[used.min(input.len())..];
            // Sync flush is complete once output stops filling the buffer.
            if input.is_empty() && out.len() < out.capacity() {
                return out;
            }
            out.reserve(64);
        }
    }
}

/// A DATA frame (`fin` half-closes the stream).
pub(crate) fn data(stream: u32, fin: bool, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER + data.len());
    out.put_u32(stream & 0x7fff_ffff);
    out.put_u8(if fin { FLAG_FIN } else { 0 });
    put_length(&mut out, data.len());
    out.extend_from_slice(data);
    out.freeze()
}

/// PING, echoed with the client's id.
pub(crate) fn ping(id: u32) -> Bytes {
    let mut out = control(PING, 0, 4);
    out.put_u32(id);
    out.freeze()
}

/// RST_STREAM with `status`.
pub(crate) fn rst_stream(stream: u32, status: u32) -> Bytes {
    let mut out = control(RST_STREAM, 0, 8);
    out.put_u32(stream);
    out.put_u32(status);
    out.freeze()
}

fn control(kind: u16, flags: u8, length: usize) -> BytesMut {
    let mut out = BytesMut::with_capacity(HEADER + length);
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u8(flags);
    put_length(&mut out, length);
    out
}

fn put_length(out: &mut BytesMut, length: usize) {
    let bytes = (length as u32).to_be_bytes();
    out.extend_from_slice(&bytes[1..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's side of the header compression, as spdystream writes it.
    fn syn_stream(deflate: &mut Compress, stream: u32, headers: &[(&str, &str)]) -> Bytes {
        let mut raw = BytesMut::new();
        raw.put_u32(headers.len() as u32);
        for (name, value) in headers {
            raw.put_u32(name.len() as u32);
            raw.extend_from_slice(name.as_bytes());
            raw.put_u32(value.len() as u32);
            raw.extend_from_slice(value.as_bytes());
        }
        let mut block = Vec::with_capacity(raw.len() + 64);
        deflate.compress_vec(&raw, &mut block, FlushCompress::Sync).unwrap();
        let mut out = control(SYN_STREAM, 0, 10 + block.len());
        out.put_u32(stream);
        out.put_u32(0);
        out.put_u16(0);
        out.extend_from_slice(&block);
        out.freeze()
    }

    #[test]
    fn the_dictionary_is_spdy3s() {
        let mut deflate = Compress::new(Compression::default(), true);
        // Its Adler-32, as SPDY/3's zlib streams name it (FDICT).
        assert_eq!(deflate.set_dictionary(&DICTIONARY).unwrap(), 0xe3c6_a7c2);
        assert_eq!(DICTIONARY.len(), 1423);
    }

    #[test]
    fn frames_are_read_across_pieces_and_header_blocks_share_a_stream() {
        let mut client = Compress::new(Compression::default(), true);
        client.set_dictionary(&DICTIONARY).unwrap();
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&syn_stream(
            &mut client,
            1,
            &[("streamType", "error"), ("port", "8265")],
        ));
        wire.extend_from_slice(&syn_stream(&mut client, 3, &[("streamtype", "data"), ("port", "8265")]));
        wire.extend_from_slice(&data(3, true, b"GET / HTTP/1.1\r\n\r\n"));
        wire.extend_from_slice(&ping(1));
        let mut decoder = Decoder::default();
        let mut frames = Vec::new();
        for piece in wire.chunks(5) {
            decoder.extend(piece);
            while let Some(frame) = decoder.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        let headers = |kind: &str| {
            vec![
                ("streamtype".to_owned(), kind.to_owned()),
                ("port".to_owned(), "8265".to_owned()),
            ]
        };
        assert_eq!(
            frames,
            [
                Frame::SynStream {
                    stream: 1,
                    fin: false,
                    headers: headers("error")
                },
                Frame::SynStream {
                    stream: 3,
                    fin: false,
                    headers: headers("data")
                },
                Frame::Data {
                    stream: 3,
                    fin: true,
                    data: Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n")
                },
                Frame::Ping(1),
            ]
        );
    }

    #[test]
    fn replies_inflate_with_the_dictionary_one_stream_for_all() {
        let mut encoder = Encoder::default();
        let mut inflate = Decompress::new(true);
        for stream in [1, 3, 5] {
            let reply = encoder.syn_reply(stream);
            assert_eq!(&reply[..4], &[0x80, 0x03, 0x00, 0x02]);
            assert_eq!(u32::from_be_bytes([reply[8], reply[9], reply[10], reply[11]]), stream);
            let mut out = Vec::with_capacity(64);
            let block = &reply[12..];
            if let Err(e) = inflate.decompress_vec(block, &mut out, FlushDecompress::Sync) {
                assert!(e.needs_dictionary().is_some());
                inflate.set_dictionary(&DICTIONARY).unwrap();
                let used = inflate.total_in() as usize;
                inflate
                    .decompress_vec(&block[used..], &mut out, FlushDecompress::Sync)
                    .unwrap();
            }
            assert_eq!(out, [0, 0, 0, 0], "no headers");
        }
    }

    #[test]
    fn bad_input_is_refused_not_panicked_on() {
        let mut decoder = Decoder::default();
        decoder.extend(&[0x80, 0x02, 0x00, 0x01, 0, 0, 0, 0]);
        assert!(decoder.next_frame().unwrap_err().0.contains("version 2"));
        let mut decoder = Decoder::default();
        decoder.extend(&[0x80, 0x03, 0x00, 0x01, 0, 0xff, 0xff, 0xff]);
        assert!(decoder.next_frame().is_err(), "16 MiB frame");
        let mut decoder = Decoder::default();
        decoder.extend(&[0x80, 0x03, 0x00, 0x01, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert!(decoder.next_frame().unwrap_err().0.contains("inflate"));
        let mut decoder = Decoder::default();
        decoder.extend(&[0x80, 0x03, 0x00, 0x06, 0, 0, 0, 2, 0, 0]);
        assert!(decoder.next_frame().unwrap_err().0.contains("too short"));
        assert!(parse_headers(&[0, 0, 0, 1, 0, 0, 0, 9, b'a']).is_err());
    }
}
