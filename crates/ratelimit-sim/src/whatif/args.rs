//! `ratelimit-sim what-if`: its options.

use super::format::Format;
use clap::Parser;

/// `ratelimit-sim what-if --policy FILE --log FILE [OPTIONS]`.
///
/// ```
/// use clap::Parser;
/// use ratelimit_sim::{Cli, Command};
///
/// let cli = Cli::try_parse_from(["ratelimit-sim", "what-if", "--policy", "ratelimit.toml", "--log", "access.log"]).unwrap();
/// let Some(Command::WhatIf(args)) = cli.command else { panic!() };
/// assert_eq!((args.policy.as_str(), args.log.as_str()), ("ratelimit.toml", "access.log"));
/// ```
#[derive(Debug, Clone, Parser)]
#[command(
    name = "what-if",
    override_usage = "ratelimit-sim what-if --policy ratelimit.toml --log access.log [OPTIONS]",
    after_help = WHAT_IF_HELP
)]
pub struct WhatIfArgs {
    /// The policy file to try (tower-ratelimit's TOML policy table)
    #[arg(long, value_name = "FILE")]
    pub policy: String,
    /// The access log ('-': standard input); gzipped logs are read as they are
    #[arg(long, value_name = "FILE")]
    pub log: String,
    /// The log's format [default: detected from its first lines]
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// JSON lines: the field holding a part of the request, PART=FIELD
    /// (time, remote, method, path, request, status, forwarded, header:NAME); repeated
    #[arg(long = "field", value_name = "PART=FIELD")]
    pub fields: Vec<String>,
    /// The proxies whose forwarding header `client-ip` trusts, comma-separated CIDRs
    #[arg(long, value_name = "CIDR,...", default_value = "")]
    pub trusted_proxies: String,
    /// The one header the trusted proxies write: x-forwarded-for, forwarded, either, or a single-address header (x-real-ip)
    #[arg(long, value_name = "NAME", default_value = "x-forwarded-for")]
    pub proxy_header: String,
    /// A key the app defines (`app:NAME` in the policy), as a key of the table: NAME=SPEC (anonymous-ip=client-ip); repeated
    #[arg(long = "app-key", value_name = "NAME=SPEC")]
    pub app_keys: Vec<String>,
    /// Each limit's store holds at most N keys (the report says when one reached it)
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_keys: u64,
    /// How many of the keys limited most each limit lists
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
    /// Show every key as a hash (API keys and bearer tokens always are)
    #[arg(long)]
    pub redact: bool,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Compare with this policy (the one running now) on the same log
    #[arg(long, value_name = "FILE")]
    pub against: Option<String>,
    /// Also draw the limited requests over time, one panel per limit, to this SVG file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
    /// Also write each line's decision to this file: LINE STATUS admitted | limited LIMIT KEY | dry-run LIMIT KEY | key-error LIMIT STATUS | skipped
    #[arg(long, value_name = "FILE")]
    pub decisions: Option<String>,
}

const WHAT_IF_HELP: &str = "\
Replays an access log through the layers a policy file builds (tower-ratelimit's
own route matching, keys, algorithms, costs and counted statuses, the log's status
answering each request), on a clock set from the log's timestamps, and reports per
limit and per route: requests seen, admitted and limited, distinct keys limited, the
keys limited most, the first and busiest minutes of limiting, and how many limited
requests the log shows served (2xx, 3xx).

Each request's peer is the logged remote address; the logged X-Forwarded-For goes in
the header --proxy-header names, which `client-ip` reads only from --trusted-proxies.

Formats: nginx (combined, optionally with \"$http_x_forwarded_for\" and $request_time
appended), json (one object a line; see --field), alb (AWS Application Load
Balancer), envoy (Envoy's default).

Examples:
  $ ratelimit-sim what-if --policy ratelimit.toml --log access.log.gz --trusted-proxies 10.0.0.0/8
  $ ratelimit-sim what-if --policy new.toml --against ratelimit.toml --log access.log --json
  $ ratelimit-sim what-if --policy ratelimit.toml --log app.jsonl --field header:x-api-key=api_key --svg limited.svg";
