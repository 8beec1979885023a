//! `hyper-example` as a process: it logs by default, refuses bad settings
//! at startup, caps connections per client and in all (below the
//! open-file limit), and sheds idle connections and backs off instead of
//! spinning when it runs out of file descriptors.

use ratelimit_test_support::spawned::{self, run_to_exit, Spawned};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

fn example() -> Command {
    example_in(Command::new(env!("CARGO_BIN_EXE_hyper-example")))
}

/// `cmd` on a free port, with none of the settings from the test's
/// environment.
fn example_in(mut cmd: Command) -> Command {
    for var in [
        "RATELIMIT_MAX_KEYS",
        "RUST_LOG",
        "MAX_CONNECTIONS",
        "MAX_CONNECTIONS_PER_CLIENT",
    ] {
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
    for (var, value) in [
        ("RATELIMIT_MAX_KEYS", "1e6"),
        ("RUST_LOG", "="),
        ("MAX_CONNECTIONS", "0"),
        ("MAX_CONNECTIONS_PER_CLIENT", "many"),
    ] {
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

/// A connection to `to` from the loopback address `from` (Linux answers
/// on all of 127.0.0.0/8): another client.
fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((Ipv4Addr::from(from), 0).into()).unwrap();
        let stream = socket.connect(to).await.expect("connect");
        let stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    })
}

/// Sends `GET /` on `stream`: the status, and how long the answer took.
fn get_on(mut stream: TcpStream) -> (u16, Duration) {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(GET.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, start.elapsed())
}

/// Whether the server closed `stream` (without answering) within 10 s.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

/// The example under an open-file limit of `files` (Linux `ulimit -n`).
#[cfg(target_os = "linux")]
fn with_open_files(files: u32) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -n {files} && exec \"$0\""))
        .arg(env!("CARGO_BIN_EXE_hyper-example"));
    example_in(sh)
}

/// One client opens idle connections past the open-file limit (256): the
/// global cap, kept below it (224), is reached first, and the client's
/// connections past it are closed at once, so the process never runs out
/// of file descriptors; another client's connection replaces the one idle
/// longest and is answered at once (within 5 s here, a margin for a busy
/// machine; a few ms when idle).
#[cfg(target_os = "linux")]
#[test]
fn idle_connections_up_to_the_file_limit_leave_room_for_others() {
    let mut cmd = with_open_files(256);
    cmd.env("MAX_CONNECTIONS_PER_CLIENT", "1000");
    let mut app = Spawned::start(cmd);
    let mut idle: Vec<TcpStream> = (0..400)
        .map(|_| TcpStream::connect(app.addr).expect("connect"))
        .collect();
    let (status, took) = get_on(connect_from([127, 0, 0, 2], app.addr));
    eprintln!("another client answered in {took:?}");
    assert_eq!(status, 200, "log: {:#?}", app.log);
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    assert!(
        app.log.join("\n").contains("max_connections: 224"),
        "{:#?}",
        app.log
    );
    // Past the cap (its own, at most the global one), the client's new
    // connections were closed; the other client's took the place of the
    // oldest; the rest are still served.
    assert!(closed_by_server(&mut idle[399]), "over the cap");
    assert!(
        closed_by_server(&mut idle[0]),
        "the oldest idle one is shed"
    );
    assert_eq!(get_on(idle.swap_remove(1)).0, 200);
    assert!(
        app.wait_for("accept failed", Duration::from_millis(100))
            .is_none(),
        "out of file descriptors: {:#?}",
        app.log
    );
}

/// With 64 file descriptors and a global cap set close to them (60), 150
/// idle connections exhaust them: the accept loop sheds the connections
/// idle longest and waits (10 ms doubling to 1 s) rather than retry at
/// once, so the process stays nearly idle and another client is served.
#[cfg(target_os = "linux")]
#[test]
fn out_of_file_descriptors_sheds_idle_connections_and_backs_off() {
    let mut cmd = with_open_files(64);
    cmd.env("MAX_CONNECTIONS", "60")
        .env("MAX_CONNECTIONS_PER_CLIENT", "60");
    let mut app = Spawned::start(cmd);
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
    let (status, took) = get_on(connect_from([127, 0, 0, 2], app.addr));
    eprintln!("another client answered in {took:?}");
    assert_eq!(status, 200, "log: {:#?}", app.log);
    assert!(took < Duration::from_secs(2), "answered after {took:?}");
    drop(idle);
    assert_eq!(app.status(GET), 200);
}

/// `MAX_CONNECTIONS_PER_CLIENT=4`: a fifth connection from one address is
/// closed at once, unanswered (logged, counted), while the four are served
/// and another address still connects.
#[test]
fn a_fifth_connection_from_one_client_is_closed() {
    let metrics = ratelimit_test_support::redis_server::free_port();
    let mut cmd = example();
    cmd.env("MAX_CONNECTIONS_PER_CLIENT", "4")
        .env("METRICS_ADDR", format!("127.0.0.1:{metrics}"));
    let mut app = Spawned::start(cmd);
    let mut four: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(app.addr).unwrap())
        .collect();
    let mut fifth = TcpStream::connect(app.addr).unwrap();
    assert!(closed_by_server(&mut fifth), "a fifth connection is served");
    assert!(app
        .wait_for("connection cap per client reached", Duration::from_secs(10))
        .is_some());
    assert_eq!(get_on(connect_from([127, 0, 0, 2], app.addr)).0, 200);
    assert_eq!(get_on(four.pop().unwrap()).0, 200);
    let mut scrape = TcpStream::connect(("127.0.0.1", metrics)).unwrap();
    scrape
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    scrape
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    scrape.read_to_string(&mut text).unwrap();
    assert!(
        text.contains("server_connections_closed_total{reason=\"client_cap\"} 1"),
        "{text}"
    );
    // Its place is free again, once the server has seen it close: the
    // client reads the end of the answer a moment before the server's
    // connection task ends and gives the place back.
    assert_eq!(served_within(app.addr, Duration::from_secs(10)), 200);
}

/// The status of `GET /` on a new connection, retried every 20 ms while
/// the server closes the connection unanswered, for at most `wait`.
fn served_within(addr: SocketAddr, wait: Duration) -> u16 {
    let start = Instant::now();
    loop {
        let status = get_on(TcpStream::connect(addr).unwrap()).0;
        if status != 0 || start.elapsed() > wait {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The global limit is GitHub's 5,000 an hour in an aligned window: its
/// `t` is the seconds to the next full UTC hour (the layer's clock counts
/// from the Unix epoch), within 2 s.
#[test]
fn the_hourly_window_ends_at_the_full_utc_hour() {
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
