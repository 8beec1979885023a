//! `ratelimit-sim ALGORITHM [OPTIONS] < TRACE`, or a subcommand
//! (`generate`, `compare`, `plot`): see the crate docs and `--help`.

use clap::error::ErrorKind;
use clap::Parser;
use ratelimit_sim::{Cli, SimError};
use std::io::{self, BufWriter};
use std::process::ExitCode;

/// A replay (`what-if`) allocates per request: mimalloc is faster at it
/// than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            // Help and version go to standard output.
            return match e.print() {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            };
        }
        Err(e) => {
            let noun = match args.get(1) {
                Some(first) if first == "generate" => "generator",
                _ => "algorithm or subcommand",
            };
            return fail(&ratelimit_sim::cli_error(&e, noun));
        }
    };
    let Some(command) = cli.command else {
        return fail(&SimError(
            "missing ALGORITHM or subcommand; see 'ratelimit-sim --help'".to_owned(),
        ));
    };
    let stdin = io::stdin().lock();
    let stdout = BufWriter::new(io::stdout().lock());
    match ratelimit_sim::run(&command, stdin, stdout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// One line on standard error, exit status 2.
fn fail(e: &SimError) -> ExitCode {
    eprintln!("ratelimit-sim: {e}");
    ExitCode::from(2)
}
