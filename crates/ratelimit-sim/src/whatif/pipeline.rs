//! Parsing on a second thread: the replay's thread reads the log's raw
//! lines and replays them; a parser thread turns each batch of lines into
//! requests in the meantime.

use super::format::{Format, JsonFields};
use super::input::{next_line, text};
use super::line::LogLine;
use crate::SimError;
use std::io::BufRead;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Lines per batch.
const BATCH: usize = 4096;

/// Raw lines: their bytes end to end, and where each ends.
#[derive(Default)]
pub struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Batch {
    /// Adds a line.
    pub fn push(&mut self, line: &[u8]) {
        self.bytes.extend_from_slice(line);
        self.ends.push(self.bytes.len());
    }

    /// Reads up to [`BATCH`] non-blank lines of `reader` into `batch`
    /// (emptied first: a batch handed back is read into again); `None` at
    /// the end of `reader`.
    pub fn read(
        reader: &mut dyn BufRead,
        buf: &mut Vec<u8>,
        mut batch: Self,
    ) -> Result<Option<Self>, SimError> {
        batch.bytes.clear();
        batch.ends.clear();
        while batch.ends.len() < BATCH && next_line(reader, buf)? {
            if !buf.iter().all(u8::is_ascii_whitespace) {
                batch.push(buf);
            }
        }
        Ok((!batch.ends.is_empty()).then_some(batch))
    }
}

/// Each line of a batch parsed, or why it is not a request; and the batch,
/// to be read into again.
pub type Parsed = (Vec<Result<LogLine, String>>, Batch);

/// The parser thread and its channels.
pub struct Parser {
    raw: Option<SyncSender<Batch>>,
    parsed: Receiver<Parsed>,
    thread: Option<JoinHandle<()>>,
    in_flight: usize,
}

impl Parser {
    /// Starts the thread, parsing `format` (JSON lines through `fields`).
    pub fn start(format: Format, fields: JsonFields) -> Self {
        let (raw, todo) = sync_channel::<Batch>(2);
        let (done, parsed) = sync_channel::<Parsed>(2);
        let thread = std::thread::spawn(move || {
            for batch in todo {
                let mut start = 0;
                let lines = batch
                    .ends
                    .iter()
                    .map(|&end| {
                        let line = text(&batch.bytes[start..end]);
                        start = end;
                        format.parse(&line, &fields)
                    })
                    .collect();
                if done.send((lines, batch)).is_err() {
                    return;
                }
            }
        });
        Self {
            raw: Some(raw),
            parsed,
            thread: Some(thread),
            in_flight: 0,
        }
    }

    /// Hands `batch` to the thread.
    pub fn send(&mut self, batch: Batch) -> Result<(), SimError> {
        let stopped = || SimError("the log's parser stopped".to_owned());
        self.raw
            .as_ref()
            .ok_or_else(stopped)?
            .send(batch)
            .map_err(|_| stopped())?;
        self.in_flight += 1;
        Ok(())
    }

    /// The oldest batch handed over, parsed; `None` when none is left.
    pub fn recv(&mut self) -> Result<Option<Parsed>, SimError> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        self.in_flight -= 1;
        self.parsed
            .recv()
            .map(Some)
            .map_err(|_| SimError("the log's parser stopped".to_owned()))
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        // No more batches; and the thread's next hand-over fails, so it
        // stops even mid-log (an error stopped the replay).
        self.raw = None;
        drop(std::mem::replace(&mut self.parsed, sync_channel(0).1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
