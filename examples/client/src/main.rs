//! `client-example [URL] [N]`: makes N (default 30) `GET` requests to URL
//! (default the axum example's `http://127.0.0.1:3000/api/items`, 10 per
//! minute anonymously) and reports how many it sent, how many 429s it got
//! and how long it took. Start the server first: `cargo run -p axum-example`.

use client_example::run;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:3000/api/items".into());
    let n = args.next().unwrap_or_else(|| "30".into());
    let (uri, n) = match (url.parse::<http::Uri>(), n.parse::<u32>()) {
        (Ok(uri), Ok(n)) if uri.host().is_some() => (uri, n),
        _ => {
            eprintln!("usage: client-example [URL] [N]: an absolute http URL and a count ({url:?}, {n:?} given)");
            return ExitCode::from(2);
        }
    };
    let http = Client::builder(TokioExecutor::new()).build_http();
    println!("{n} requests to {uri}, paced by the server's RateLimit fields...");
    match run(http, uri, n).await {
        Ok(report) => {
            println!(
                "requests: {}, sent: {}, 429s: {}, failed: {}, time: {:.1} s",
                report.requests,
                report.sent,
                report.limited,
                report.failed,
                report.elapsed.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("client-example: {e}");
            ExitCode::FAILURE
        }
    }
}
