//! `ratelimit-sim ALGORITHM [OPTIONS] < TRACE`: see the crate docs.

use std::io::{self, BufWriter};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("-h" | "--help")) {
        println!("{}", ratelimit_sim::usage());
        return ExitCode::SUCCESS;
    }
    let result = ratelimit_sim::parse_algorithm(&args).and_then(|algorithm| {
        let stdin = io::stdin().lock();
        let stdout = BufWriter::new(io::stdout().lock());
        ratelimit_sim::replay(algorithm, stdin, stdout)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ratelimit-sim: {e}");
            ExitCode::from(2)
        }
    }
}
