//! Gzip input decompressed on a helper thread, so that decompressing the next window of
//! events overlaps parsing this one.
//!
//! The compressed input is still read on the calling thread (a reader need not be `Send`)
//! and handed to the helper in chunks; the decompressed text comes back in chunks, at most
//! [`AHEAD`] of them ahead of the reader. Each side tops the other up before it waits: the
//! reader hands over all the input the helper can hold before it waits for text, and the
//! helper says it is out of input before it waits for more (some input, such as a long
//! header comment, makes no text), so the two never wait on each other.

use std::io::{self, BufRead, Read};
use std::mem;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::thread::Scope;

use flate2::bufread::MultiGzDecoder;

/// Bytes of compressed input per chunk, and chunks handed over ahead: a few megabytes,
/// which decompress to more than [`AHEAD`] chunks of text.
const INPUT_CHUNK: usize = 64 << 10;
const INPUT_AHEAD: usize = 64;

/// Bytes of text per chunk, and chunks decompressed ahead: about one window of events.
const CHUNK: usize = 1 << 20;
const AHEAD: usize = 32;

/// A chunk of text: the buffer (kept at its full length, reused) and how much of it is text.
type Text = (Vec<u8>, usize);

/// What the helper sends the reader.
enum Message {
    Text(Text),
    /// The helper is out of input, and waits for more.
    Hungry,
    /// The stream is broken; nothing follows.
    Failed(io::Error),
}

/// The decompressed text of a gzip input (every member), read on the calling thread while a
/// helper thread decompresses.
pub(super) struct Inflating<R> {
    input: R,
    /// Closed (`None`) once all the input is handed over.
    to_helper: Option<SyncSender<Vec<u8>>>,
    /// A chunk of input that did not fit in the channel yet.
    unsent: Option<Vec<u8>>,
    /// Whether the input is read to its end (or its error).
    input_done: bool,
    /// The input's read error: reported once the text decompressed before it is read.
    input_error: Option<io::Error>,
    from_helper: Receiver<Message>,
    /// Emptied text buffers, back to the helper.
    spent: Sender<Vec<u8>>,
    chunk: Text,
    at: usize,
}

impl<R: Read> Inflating<R> {
    /// Starts the helper thread in `scope`, which must outlive the reading.
    pub(super) fn start<'scope>(scope: &'scope Scope<'scope, '_>, input: R) -> Self {
        let (to_helper, compressed) = mpsc::sync_channel(INPUT_AHEAD);
        let (to_reader, from_helper) = mpsc::sync_channel(AHEAD);
        let (spent, buffers) = mpsc::channel();
        scope.spawn(move || inflate(compressed, to_reader, &buffers));
        Self {
            input,
            to_helper: Some(to_helper),
            unsent: None,
            input_done: false,
            input_error: None,
            from_helper,
            spent,
            chunk: (Vec::new(), 0),
            at: 0,
        }
    }

    /// Hands the helper input until its channel is full or the input ends.
    fn feed(&mut self) {
        while let Some(to_helper) = &self.to_helper {
            let chunk = match self.unsent.take() {
                Some(chunk) => chunk,
                None if self.input_done => {
                    // All of it handed over: the helper finishes.
                    self.to_helper = None;
                    return;
                }
                None => {
                    let mut chunk = vec![0; INPUT_CHUNK];
                    let (len, error) = read_full(&mut self.input, &mut chunk);
                    chunk.truncate(len);
                    // A short chunk is the last: the input ended, or failed.
                    self.input_done = len < INPUT_CHUNK;
                    self.input_error = error;
                    chunk
                }
            };
            if chunk.is_empty() {
                continue;
            }
            match to_helper.try_send(chunk) {
                Ok(()) => {}
                Err(TrySendError::Full(chunk)) => {
                    self.unsent = Some(chunk);
                    return;
                }
                // The helper stopped at an error in the stream, which it has sent.
                Err(TrySendError::Disconnected(_)) => self.to_helper = None,
            }
        }
    }
}

impl<R: Read> Read for Inflating<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            let (buf, len) = &self.chunk;
            if self.at < *len {
                let n = (len - self.at).min(out.len());
                out[..n].copy_from_slice(&buf[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            self.feed();
            match self.from_helper.recv() {
                Ok(Message::Text(chunk)) => {
                    let (spent, _) = mem::replace(&mut self.chunk, chunk);
                    if !spent.is_empty() {
                        // The helper may be gone already (it sent its last chunk).
                        let _ = self.spent.send(spent);
                    }
                    self.at = 0;
                }
                // Fed at the top of the loop.
                Ok(Message::Hungry) => {}
                Ok(Message::Failed(e)) => return Err(self.input_error.take().unwrap_or(e)),
                Err(_) => return self.input_error.take().map_or(Ok(0), Err),
            }
        }
    }
}

/// Reads until `buf` is full, the input ends or fails; returns the bytes read, and the
/// error.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut len = 0;
    while len < buf.len() {
        match input.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (len, Some(e)),
        }
    }
    (len, None)
}

/// The helper thread: decompresses the input chunks into text chunks until the stream ends,
/// fails (the error is sent after the text before it), or the reader hangs up.
fn inflate(
    compressed: Receiver<Vec<u8>>,
    to_reader: SyncSender<Message>,
    buffers: &Receiver<Vec<u8>>,
) {
    let mut decoder = MultiGzDecoder::new(Chunks {
        chunks: compressed,
        to_reader: to_reader.clone(),
        chunk: Vec::new(),
        at: 0,
    });
    loop {
        let mut buf = buffers.try_recv().unwrap_or_else(|_| vec![0; CHUNK]);
        let (len, error) = read_full(&mut decoder, &mut buf);
        if len > 0 && to_reader.send(Message::Text((buf, len))).is_err() {
            return;
        }
        if let Some(e) = error {
            let _ = to_reader.send(Message::Failed(e));
            return;
        }
        if len < CHUNK {
            return;
        }
    }
}

/// The compressed input as the helper receives it; ends when the reader closes the channel
/// (or hangs up).
struct Chunks {
    chunks: Receiver<Vec<u8>>,
    /// To say [`Message::Hungry`].
    to_reader: SyncSender<Message>,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Chunks {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.chunk.len() {
            let chunk = match self.chunks.try_recv() {
                Ok(chunk) => chunk,
                Err(TryRecvError::Empty) => {
                    // The reader may be waiting for text that this input is needed for.
                    if self.to_reader.send(Message::Hungry).is_err() {
                        break;
                    }
                    match self.chunks.recv() {
                        Ok(chunk) => chunk,
                        Err(_) => break,
                    }
                }
                Err(TryRecvError::Disconnected) => break,
            };
            (self.chunk, self.at) = (chunk, 0);
        }
        Ok(&self.chunk[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::thread;

    use flate2::write::GzEncoder;
    use flate2::Compression;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    }

    /// Some megabytes of text: more than a few chunks of input and of text.
    fn text() -> Vec<u8> {
        (0..300_000u64)
            .flat_map(|i| format!("{i} {}\n", i * 7919 % 1000).into_bytes())
            .collect()
    }

    fn inflate_all(input: impl Read) -> (Vec<u8>, Option<io::Error>) {
        thread::scope(|scope| {
            let mut text = Inflating::start(scope, input);
            let mut out = Vec::new();
            let error = text.read_to_end(&mut out).err();
            (out, error)
        })
    }

    #[test]
    fn every_member_is_decompressed_in_order() {
        let text = text();
        let (a, b) = text.split_at(text.len() / 3);
        let (out, error) = inflate_all(&[gzip(a), gzip(b)].concat()[..]);
        assert!(error.is_none(), "{error:?}");
        assert!(out == text);
    }

    #[test]
    fn an_input_error_comes_after_the_text_before_it() {
        struct ThenFail<'a>(&'a [u8]);

        impl Read for ThenFail<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    return Err(io::Error::other("unplugged"));
                }
                let n = self.0.len().min(out.len()).min(1000);
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }

        let text = text();
        let (out, error) = inflate_all(ThenFail(&gzip(&text)));
        assert!(out == text);
        assert_eq!(error.unwrap().to_string(), "unplugged");
    }

    #[test]
    fn a_broken_stream_gives_what_decompressing_on_one_thread_gives() {
        let mut gz = gzip(&text());
        gz.truncate(gz.len() * 2 / 3);
        let mut expected = Vec::new();
        let expected_error = flate2::read::MultiGzDecoder::new(&gz[..])
            .read_to_end(&mut expected)
            .unwrap_err();
        let (out, error) = inflate_all(&gz[..]);
        assert!(out == expected);
        assert_eq!(error.unwrap().kind(), expected_error.kind());

        let (out, error) = inflate_all(&b"\x1f\x8b not gzip"[..]);
        assert!(out.is_empty() && error.is_some());
    }

    #[test]
    fn input_that_makes_no_text_does_not_stall_the_reader() {
        // More input than the helper is handed at once that decompresses to nothing: empty
        // stored deflate blocks (5 bytes each) after the 10-byte header, before the blocks
        // that make the text.
        let gz = gzip(b"text");
        let empty_block = [0, 0, 0, 0xff, 0xff];
        let count = 2 * INPUT_AHEAD * INPUT_CHUNK / empty_block.len();
        let input = [&gz[..10], &empty_block.repeat(count), &gz[10..]].concat();
        let (out, error) = inflate_all(&input[..]);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(out, b"text");
    }

    #[test]
    fn the_reader_may_stop_early() {
        let gz = gzip(&text());
        // The helper ends once the reader is dropped, so the scope returns.
        let start = thread::scope(|scope| {
            let mut text = Inflating::start(scope, &gz[..]);
            let mut start = [0u8; 10];
            text.read_exact(&mut start).unwrap();
            start
        });
        assert_eq!(start, text()[..10]);
    }
}
