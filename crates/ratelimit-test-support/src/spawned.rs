//! An example binary run as a real process, its stderr (the logs) read
//! line by line.
//!
//! Used by the examples' own tests and the integration tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A running example, killed on drop.
///
/// ```no_run
/// use ratelimit_test_support::Spawned;
/// use std::process::Command;
///
/// let mut cmd = Command::new("target/debug/axum-example");
/// cmd.env("BIND_ADDR", "127.0.0.1:0");
/// let mut app = Spawned::start(cmd); // waits for its `listening on` line
/// assert_eq!(app.status("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
/// app.terminate();
/// ```
pub struct Spawned {
    child: Child,
    lines: Receiver<String>,
    /// Every stderr line read so far.
    pub log: Vec<String>,
    /// Where it listens (from its `listening on ADDR` line).
    pub addr: SocketAddr,
}

impl Spawned {
    /// Starts `cmd` (which should bind to port 0) and waits, at most 30 s,
    /// for its `listening on ADDR` log line. Panics if it exits first.
    pub fn start(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the example");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut me = Self {
            child,
            lines,
            log: Vec::new(),
            addr: ([0, 0, 0, 0], 0).into(),
        };
        let line = me
            .wait_for("listening on ", Duration::from_secs(30))
            .unwrap_or_else(|| panic!("never listened; stderr: {:#?}", me.log));
        // The address right after "listening on ", in a text or a JSON
        // log line.
        let after = line.rsplit("listening on ").next().unwrap_or_default();
        let end = after
            .find(|c: char| !(c.is_ascii_hexdigit() || ".:[]".contains(c)))
            .unwrap_or(after.len());
        me.addr = after[..end]
            .parse()
            .unwrap_or_else(|_| panic!("no address in {line:?}"));
        me
    }

    /// Sends the raw HTTP/1.1 `request` (with `Connection: close`) on a
    /// new connection: the answer's status code.
    pub fn status(&self, request: &str) -> u16 {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).expect("an answer");
        out.get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {out:?}"))
    }

    /// Asserts that every line logged so far is at `INFO` and that each
    /// of `expected` is in one of them.
    pub fn assert_info_log(&self, expected: &[&str]) {
        let log = self.log.join("\n");
        for e in expected {
            assert!(log.contains(e), "{e:?} not in\n{log}");
        }
        assert!(self.log.iter().all(|l| l.contains(" INFO ")), "{log}");
    }

    /// Sends SIGTERM (with `kill`) and waits at most 30 s for the process
    /// to exit: its status.
    #[cfg(unix)]
    pub fn terminate(&mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                // Collect the last lines.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
                    self.log.push(line);
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running 30 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits at most `timeout` for a stderr line containing `needle`
    /// (lines already read count); `None` if none came.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> Option<String> {
        if let Some(line) = self.log.iter().find(|l| l.contains(needle)) {
            return Some(line.clone());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.log.push(line);
                    if hit {
                        return self.log.last().cloned();
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to its end (at most 30 s): its exit status and stderr.
pub fn run_to_exit(mut cmd: Command) -> (ExitStatus, String) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the example");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status, err)
}

/// CPU time (user + system) of process `pid` so far, in clock ticks
/// (Linux: `/proc/PID/stat`).
#[cfg(target_os = "linux")]
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // After the command name, in parentheses: state is field 3, utime 14,
    // stime 15.
    let after = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let tick = |i: usize| fields[i - 3].parse::<u64>().expect("a tick count");
    tick(14) + tick(15)
}
