//! The worked examples of the contract, `docs/ALGORITHMS.md`, and of the
//! guide (`docs/guide/algorithms.md`), replayed through `ratelimit-sim`'s library: every
//! `printf '...' | cargo run -q -p ratelimit-sim -- ...` block must print
//! exactly the lines the page shows.

use std::path::Path;

/// One example: the trace, the sim's arguments and the expected output.
struct Example {
    line: usize,
    trace: String,
    args: Vec<String>,
    expected: Vec<String>,
}

const COMMAND: &str = " | cargo run -q -p ratelimit-sim -- ";

/// The examples of a Markdown page: a `$ printf 'TRACE'` + [`COMMAND`] line
/// in a `console` block, followed by the output lines up to the next `$`
/// line or the end of the block.
fn examples(page: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_console = false;
    let mut current: Option<Example> = None;
    for (i, line) in page.lines().enumerate() {
        if line.starts_with("```") {
            in_console = line == "```console";
            out.extend(current.take());
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            out.extend(current.take());
            let Some((printf, args)) = command.split_once(COMMAND) else {
                continue;
            };
            let trace = printf
                .strip_prefix("printf '")
                .and_then(|t| t.strip_suffix('\''))
                .unwrap_or_else(|| panic!("line {}: not a printf '...': {printf}", i + 1))
                .replace("\\n", "\n");
            current = Some(Example {
                line: i + 1,
                trace,
                args: args.split_whitespace().map(String::from).collect(),
                expected: Vec::new(),
            });
        } else if let Some(example) = current.as_mut() {
            example.expected.push(line.to_owned());
        }
    }
    out
}

fn check(file: &str, min_examples: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let page = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let examples = examples(&page);
    assert!(
        examples.len() >= min_examples,
        "{file}: found {} sim examples, expected at least {min_examples}",
        examples.len()
    );
    for ex in &examples {
        let algorithm = ratelimit_sim::parse_algorithm(&ex.args)
            .unwrap_or_else(|e| panic!("{file}:{}: {e}", ex.line));
        let mut output = Vec::new();
        ratelimit_sim::replay(algorithm, ex.trace.as_bytes(), &mut output)
            .unwrap_or_else(|e| panic!("{file}:{}: {e}", ex.line));
        let got = String::from_utf8(output).unwrap();
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got, ex.expected, "{file}:{}: the sim prints", ex.line);
    }
}

#[test]
fn the_contracts_examples_are_what_the_sim_prints() {
    check("docs/ALGORITHMS.md", 12);
}

#[test]
fn the_guides_example_is_what_the_sim_prints() {
    check("docs/guide/algorithms.md", 1);
}
