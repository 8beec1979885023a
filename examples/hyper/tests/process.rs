//! `hyper-example` as a process: it logs by default, refuses bad settings
//! at startup, and backs off instead of spinning when it runs out of file
//! descriptors.

use ratelimit_test_support::spawned::{self, run_to_exit, Spawned};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

fn example() -> Command {
    example_in(Command::new(env!("CARGO_BIN_EXE_hyper-example")))
}

/// `cmd` on a free port, with none of the settings from the test's
/// environment.
fn example_in(mut cmd: Command) -> Command {
    for var in ["RATELIMIT_MAX_KEYS", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    cmd.env("BIND_ADDR", "127.0.0.1:0");
    cmd
}

const GET: &str = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[test]
fn logs_at_info_by_default() {
    let app = Spawned::start(example());
    app.assert_info_log(&[
        "limits in memory",
        "per_ip=200",
        "max_keys=1000000",
        "header_read_timeout: 10s",
        "listening on 127.0.0.1:",
    ]);
    assert_eq!(app.status(GET), 200);
}

#[test]
fn bad_settings_are_startup_errors_naming_the_variable() {
    for (var, value) in [("RATELIMIT_MAX_KEYS", "1e6"), ("RUST_LOG", "=")] {
        let mut cmd = example();
        cmd.env(var, value);
        let (status, err) = run_to_exit(cmd);
        assert_eq!(status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(var), "{var}={value}: {err}");
    }
    let mut cmd = example();
    cmd.env("RATELIMIT_MAX_KEYS", "20");
    let app = Spawned::start(cmd);
    assert!(app.log.join("\n").contains("max_keys=20"));
}

/// With 64 file descriptors, 150 idle connections exhaust them: the
/// accept loop must wait (10 ms doubling to 1 s) rather than retry at
/// once, so the process stays nearly idle; once the connections close it
/// serves again.
#[cfg(target_os = "linux")]
#[test]
fn out_of_file_descriptors_backs_off_then_serves_again() {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("ulimit -n 64 && exec \"$0\"")
        .arg(env!("CARGO_BIN_EXE_hyper-example"));
    let mut app = Spawned::start(example_in(sh));
    let idle: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(app.addr).expect("the kernel queues them"))
        .collect();
    app.wait_for("accept failed: backing off", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("no EMFILE; log: {:#?}", app.log));
    // Over 2 s, at most 0.1 s of CPU time (ticks are 10 ms on Linux); a
    // spinning loop takes a core, 0.5 s or more even on a busy machine.
    let before = spawned::cpu_ticks(app.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = spawned::cpu_ticks(app.id()) - before;
    assert!(used <= 10, "{used} ticks of CPU in 2 s while out of fds");
    drop(idle);
    assert_eq!(app.status(GET), 200);
}

/// The global limit is GitHub's 5,000 an hour in an aligned window: its
/// `t` is the seconds to the next full UTC hour (the layer's clock counts
/// from the Unix epoch), within 2 s.
#[test]
fn the_hourly_window_ends_at_the_full_utc_hour() {
    use std::io::{Read, Write};
    let app = Spawned::start(example());
    let mut stream = TcpStream::connect(app.addr).unwrap();
    stream.write_all(GET.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let to_hour = 3600 - wall % 3600;
    let fields: Vec<&str> = response
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("ratelimit:"))
        .flat_map(|l| l[l.find(':').unwrap() + 1..].split(','))
        .filter(|item| item.contains(";r=4999;"))
        .collect();
    let [global] = fields[..] else {
        panic!("no single item with r=4999 in {response}");
    };
    let t: u64 = global
        .split(';')
        .find_map(|p| p.trim().strip_prefix("t="))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no t in {global}"));
    // `t` is rounded up; the hour may turn between the two readings.
    let off = t.abs_diff(to_hour).min(t.abs_diff(to_hour + 3600));
    assert!(off <= 2, "t={t}, {to_hour} s to the full hour");
}
