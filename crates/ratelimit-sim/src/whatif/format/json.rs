//! JSON lines: one object a line, its fields mapped to a request's parts
//! (`--field PART=FIELD`; a dotted `FIELD` reads nested objects).
//!
//! | part | default fields, first present wins |
//! |---|---|
//! | `time` | `time`, `timestamp`, `@timestamp`, `time_local`, `ts`, `msec` (ISO 8601, nginx's local time, or Unix seconds / milliseconds) |
//! | `remote` | `remote_addr`, `client_ip`, `remote_ip`, `ip` |
//! | `method` | `method`, `request_method` |
//! | `path` | `path`, `uri`, `request_uri`, `url` |
//! | `request` | `request` (`GET /path HTTP/1.1`: method and path, when those are absent) |
//! | `status` | `status`, `status_code` |
//! | `forwarded` | `x_forwarded_for`, `http_x_forwarded_for`, `xff` |
//! | `header:NAME` | none: a request header, such as `header:x-api-key=api_key` |

use super::fields::request;
use crate::whatif::line::{present, LogLine};
use crate::whatif::time::{parse_any, parse_epoch};
use serde_json::Value;

/// Which JSON fields hold which part of a request.
///
/// ```
/// use ratelimit_sim::whatif::JsonFields;
///
/// assert!(JsonFields::new(&["time=ts".to_string(), "header:x-api-key=api_key".to_string()]).is_ok());
/// assert!(JsonFields::new(&["nonsense=x".to_string()]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonFields {
    time: Vec<String>,
    remote: Vec<String>,
    method: Vec<String>,
    path: Vec<String>,
    request: Vec<String>,
    status: Vec<String>,
    forwarded: Vec<String>,
    headers: Vec<(String, String)>,
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl Default for JsonFields {
    fn default() -> Self {
        Self {
            time: names(&[
                "time",
                "timestamp",
                "@timestamp",
                "time_local",
                "ts",
                "msec",
            ]),
            remote: names(&["remote_addr", "client_ip", "remote_ip", "ip"]),
            method: names(&["method", "request_method"]),
            path: names(&["path", "uri", "request_uri", "url"]),
            request: names(&["request"]),
            status: names(&["status", "status_code"]),
            forwarded: names(&["x_forwarded_for", "http_x_forwarded_for", "xff"]),
            headers: Vec::new(),
        }
    }
}

impl JsonFields {
    /// The defaults with each `PART=FIELD` of `mapping` in place of the
    /// part's defaults; an unknown part is an error naming it.
    pub fn new(mapping: &[String]) -> Result<Self, String> {
        let mut fields = Self::default();
        for m in mapping {
            let (part, field) = m
                .split_once('=')
                .filter(|(p, f)| !p.is_empty() && !f.is_empty())
                .ok_or_else(|| format!("bad --field {m:?}: expected PART=FIELD"))?;
            let slot = match part {
                "time" => &mut fields.time,
                "remote" => &mut fields.remote,
                "method" => &mut fields.method,
                "path" => &mut fields.path,
                "request" => &mut fields.request,
                "status" => &mut fields.status,
                "forwarded" => &mut fields.forwarded,
                other => match other.strip_prefix("header:") {
                    Some(name) if http::HeaderName::try_from(name).is_ok() => {
                        fields.headers.push((name.to_owned(), field.to_owned()));
                        continue;
                    }
                    _ => {
                        return Err(format!(
                            "bad --field {m:?}: unknown part {other:?}; expected time, remote, \
                             method, path, request, status, forwarded or header:NAME"
                        ))
                    }
                },
            };
            *slot = vec![field.to_owned()];
        }
        Ok(fields)
    }
}

/// The value at a dotted path.
fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    if let Some(x) = v.get(path) {
        return Some(x);
    }
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// The first of `names` present, as text (numbers as written).
fn text(v: &Value, names: &[String]) -> Option<String> {
    names.iter().find_map(|n| match get(v, n)? {
        Value::String(s) => present(s).map(str::to_owned),
        Value::Number(x) => Some(x.to_string()),
        _ => None,
    })
}

/// Whether `line` looks like a JSON object.
pub fn looks_like(line: &str) -> bool {
    line.trim_start().starts_with('{') && serde_json::from_str::<Value>(line).is_ok()
}

/// One line, or why it is not one.
pub fn parse(line: &str, fields: &JsonFields) -> Result<LogLine, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("bad JSON: {e}"))?;
    let time = fields
        .time
        .iter()
        .find_map(|n| match get(&v, n)? {
            Value::Number(x) => x.as_f64().and_then(parse_epoch),
            Value::String(s) => parse_any(s),
            _ => None,
        })
        .ok_or_else(|| format!("no time in {:?}", fields.time))?;
    let remote = text(&v, &fields.remote)
        .ok_or_else(|| format!("no remote address in {:?}", fields.remote))?;
    let remote = remote
        .parse()
        .map_err(|_| format!("bad remote address {remote:?}"))?;
    let from_request = text(&v, &fields.request);
    let from_request = from_request.as_deref().and_then(request);
    let method = text(&v, &fields.method)
        .or_else(|| from_request.map(|r| r.0.to_owned()))
        .ok_or_else(|| format!("no method in {:?}", fields.method))?;
    let target = text(&v, &fields.path)
        .or_else(|| from_request.map(|r| r.1.to_owned()))
        .ok_or_else(|| format!("no path in {:?}", fields.path))?;
    let status = text(&v, &fields.status)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {:?}", fields.status))?;
    let headers = fields
        .headers
        .iter()
        .filter_map(|(name, field)| Some((name.clone(), text(&v, std::slice::from_ref(field))?)))
        .collect();
    Ok(LogLine {
        time,
        remote,
        method,
        target,
        status,
        forwarded: text(&v, &fields.forwarded),
        headers,
    })
}
