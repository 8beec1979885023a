//! `ratelimit-sim ALGORITHM [OPTIONS] < TRACE`, or a subcommand
//! (`generate`, `compare`, `plot`): see the crate docs.

use ratelimit_sim::SimError;
use std::io::{self, BufWriter};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let help = |rest: &[String]| rest.iter().any(|a| a == "-h" || a == "--help");
    let result = match args.first().map(String::as_str) {
        Some("-h" | "--help") => {
            println!("{}", ratelimit_sim::usage());
            println!("{}", ratelimit_sim::subcommands_usage());
            return ExitCode::SUCCESS;
        }
        Some(command @ ("generate" | "compare" | "plot")) => {
            let rest = &args[1..];
            if help(rest) {
                match command {
                    "generate" => println!(
                        "usage: ratelimit-sim generate NAME [OPTIONS] > TRACE\n{}",
                        ratelimit_sim::generator_usage()
                    ),
                    "compare" => println!("{}", ratelimit_sim::compare_usage()),
                    _ => println!("{}", ratelimit_sim::plot_usage()),
                }
                return ExitCode::SUCCESS;
            }
            subcommand(command, rest)
        }
        _ => ratelimit_sim::parse_algorithm(&args).and_then(|algorithm| {
            let stdin = io::stdin().lock();
            let stdout = BufWriter::new(io::stdout().lock());
            ratelimit_sim::replay(algorithm, stdin, stdout)
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ratelimit-sim: {e}");
            ExitCode::from(2)
        }
    }
}

fn subcommand(command: &str, args: &[String]) -> Result<(), SimError> {
    let stdin = io::stdin().lock();
    let stdout = BufWriter::new(io::stdout().lock());
    match command {
        "generate" => ratelimit_sim::run_generate(args, stdout),
        "compare" => ratelimit_sim::run_compare(args, stdin, stdout),
        _ => ratelimit_sim::run_plot(args, stdin, stdout),
    }
}
