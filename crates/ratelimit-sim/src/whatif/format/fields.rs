//! Splitting a log line into fields: bare words, `"quoted"` text (with
//! nginx's `\x22` and backslash escapes) and `[bracketed]` text.

/// The fields of `line`, in order, without their quotes or brackets.
pub fn split(line: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(16);
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' => i += 1,
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(b.len());
                out.push(&line[start..end]);
                i = end + 1;
            }
            b'[' => {
                let start = i + 1;
                let end = line[start..].find(']').map_or(b.len(), |e| start + e);
                out.push(&line[start..end]);
                i = end + 1;
            }
            _ => {
                let start = i;
                while i < b.len() && b[i] != b' ' && b[i] != b'\t' {
                    i += 1;
                }
                out.push(&line[start..i]);
            }
        }
    }
    out
}

/// `"GET /path HTTP/1.1"`: the method and the target.
pub fn request(s: &str) -> Option<(&str, &str)> {
    let mut it = s.split(' ');
    let method = it.next().filter(|m| !m.is_empty())?;
    let target = it.next().filter(|t| !t.is_empty())?;
    Some((method, target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_quotes_and_brackets() {
        let line =
            r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a\"b HTTP/1.1" 200 5 "-" "ua x""#;
        assert_eq!(
            split(line),
            [
                "1.2.3.4",
                "-",
                "-",
                "10/Oct/2000:13:55:36 -0700",
                r#"GET /a\"b HTTP/1.1"#,
                "200",
                "5",
                "-",
                "ua x"
            ]
        );
        assert_eq!(request("GET /x?y HTTP/1.1"), Some(("GET", "/x?y")));
    }
}
