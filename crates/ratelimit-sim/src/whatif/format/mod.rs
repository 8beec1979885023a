//! The access-log formats `what-if` reads, one file each, and their
//! detection from a log's first lines.

mod alb;
mod envoy;
mod fields;
mod json;
mod nginx;

pub use json::JsonFields;

use super::line::LogLine;
use clap::ValueEnum;

/// An access-log format.
///
/// ```
/// use ratelimit_sim::whatif::Format;
///
/// let line = r#"{"time":"2025-12-02T10:00:00Z","remote":"192.0.2.7","method":"GET","path":"/","status":200}"#;
/// assert_eq!(Format::of(line), Some(Format::Json));
/// assert_eq!(Format::Json.name(), "json");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// nginx `combined`, optionally with `"$http_x_forwarded_for"` and
    /// `$request_time` appended.
    Nginx,
    /// JSON lines (fields mapped with `--field`).
    Json,
    /// AWS Application Load Balancer.
    Alb,
    /// Envoy's default access log.
    Envoy,
}

impl Format {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Json => "json",
            Self::Alb => "alb",
            Self::Envoy => "envoy",
        }
    }

    /// The format of `line`, if one fits.
    pub fn of(line: &str) -> Option<Self> {
        if json::looks_like(line) {
            Some(Self::Json)
        } else if alb::looks_like(line) {
            Some(Self::Alb)
        } else if envoy::looks_like(line) {
            Some(Self::Envoy)
        } else if nginx::looks_like(line) {
            Some(Self::Nginx)
        } else {
            None
        }
    }

    /// The format most of `lines` (a log's first non-empty lines) fit.
    pub fn detect<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut votes = [0usize; 4];
        let mut seen = 0;
        for line in lines {
            seen += 1;
            if let Some(f) = Self::of(line) {
                votes[f as usize] += 1;
            }
        }
        let all = [Self::Nginx, Self::Json, Self::Alb, Self::Envoy];
        match votes.iter().enumerate().max_by_key(|(_, n)| **n) {
            Some((i, n)) if *n > 0 => Ok(all[i]),
            _ if seen == 0 => Err("the log is empty: no format to detect".to_owned()),
            _ => Err(format!(
                "cannot tell the log's format from its first {seen} lines: \
                 give --format nginx, json, alb or envoy"
            )),
        }
    }

    /// One line of this format, or why it is not one.
    pub fn parse(self, line: &str, fields: &JsonFields) -> Result<LogLine, String> {
        match self {
            Self::Nginx => nginx::parse(line),
            Self::Json => json::parse(line, fields),
            Self::Alb => alb::parse(line),
            Self::Envoy => envoy::parse(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples the formats' own documentation gives (AWS's ALB
    /// guide, Envoy's access-log page, the combined format's classic
    /// line), not lines written for these tests.
    #[test]
    fn published_examples_parse() {
        let fields = JsonFields::default();
        let alb = "http 2018-07-02T22:23:00.186641Z app/my-loadbalancer/50dc6c495c0c9188 \
            192.168.131.39:2817 10.0.0.1:80 0.000 0.001 0.000 200 200 34 366 \
            \"GET http://www.example.com:80/ HTTP/1.1\" \"curl/7.46.0\" - - \
            arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 \
            \"Root=1-58337262-36d228ad5d99923122bbe354\" \"-\" \"-\" 0 2018-07-02T22:22:48.364000Z \
            \"forward\" \"-\" \"-\" \"10.0.0.1:80\" \"200\" \"-\" \"-\" TID_1234abcd5678ef90";
        let envoy = "[2016-04-15T20:17:00.310Z] \"POST /api/v1/locations HTTP/2\" 204 - 154 0 226 100 \
            \"10.0.35.28\" \"nsq2http\" \"cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2\" \"locations\" \"tcp://10.0.2.1:80\"";
        let nginx =
            "127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" \
            200 2326 \"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"";
        for (line, format, remote, method, target, status) in [
            (alb, Format::Alb, "192.168.131.39", "GET", "/", 200),
            (
                envoy,
                Format::Envoy,
                "10.0.35.28",
                "POST",
                "/api/v1/locations",
                204,
            ),
            (
                nginx,
                Format::Nginx,
                "127.0.0.1",
                "GET",
                "/apache_pb.gif",
                200,
            ),
        ] {
            assert_eq!(Format::of(line), Some(format), "{line}");
            let l = format.parse(line, &fields).unwrap();
            assert_eq!(l.remote.to_string(), remote);
            assert_eq!((l.method.as_str(), l.target.as_str()), (method, target));
            assert_eq!(l.status, status);
        }
        let l = Format::Alb.parse(alb, &fields).unwrap();
        assert_eq!(l.time, 1_530_570_180_186_641_000);
        // nginx's JSON logs (`log_format ... escape=json`), with its own
        // variables' names: every value a string.
        let json = r#"{"time_local":"10/Oct/2000:13:55:36 -0700","remote_addr":"192.0.2.7","request":"POST /login HTTP/1.1","status":"401","http_x_forwarded_for":"198.51.100.1"}"#;
        assert_eq!(Format::of(json), Some(Format::Json));
        let l = Format::Json.parse(json, &fields).unwrap();
        assert_eq!(
            (l.method.as_str(), l.target.as_str(), l.status),
            ("POST", "/login", 401)
        );
        assert_eq!(l.forwarded.as_deref(), Some("198.51.100.1"));
        assert_eq!(l.time, 971_211_336_000_000_000);
    }
}
