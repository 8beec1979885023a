//! Opening a log: a file or standard input, gzipped or not (told by the
//! gzip magic bytes, not the name).

use crate::SimError;
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader};

/// The gzip magic bytes.
const GZIP: [u8; 2] = [0x1f, 0x8b];

/// `reader`'s lines as they are, or unzipped if they are gzip.
pub fn unzipped<'a>(mut reader: impl BufRead + 'a) -> Result<Box<dyn BufRead + 'a>, SimError> {
    let head = reader
        .fill_buf()
        .map_err(|e| SimError(format!("cannot read the log: {e}")))?;
    if head.starts_with(&GZIP) {
        let decoder = MultiGzDecoder::new(reader);
        Ok(Box::new(BufReader::with_capacity(1 << 16, decoder)))
    } else {
        Ok(Box::new(reader))
    }
}

/// The log at `path` (`-`: `stdin`).
pub fn open<'a>(path: &str, stdin: impl BufRead + 'a) -> Result<Box<dyn BufRead + 'a>, SimError> {
    if path == "-" {
        return unzipped(stdin);
    }
    let file =
        File::open(path).map_err(|e| SimError(format!("cannot open the log {path}: {e}")))?;
    unzipped(BufReader::with_capacity(1 << 16, file))
}

/// Reads the next line into `buf` (without its line end); `false` at the
/// end. Bytes that are not UTF-8 are replaced.
pub fn next_line(reader: &mut dyn BufRead, buf: &mut Vec<u8>) -> Result<bool, SimError> {
    buf.clear();
    let n = reader
        .read_until(b'\n', buf)
        .map_err(|e| SimError(format!("cannot read the log: {e}")))?;
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(n > 0)
}

/// `buf` as text, replacing bytes that are not UTF-8.
pub fn text(buf: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(buf) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(buf),
    }
}
