//! A TCP proxy adding a fixed one-way delay to every byte, both ways,
//! without limiting throughput: pipelined requests stay pipelined, so a
//! slower network never turns into a queue (std threads only).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// A proxy on 127.0.0.1 to `127.0.0.1:upstream`; stops accepting on drop
/// (open connections end with their peers).
///
/// ```no_run
/// use ratelimit_test_support::{DelayProxy, RedisServer};
/// use std::time::Duration;
///
/// let Some(server) = RedisServer::start() else { return };
/// // Every byte 5 ms late each way: Redis 10 ms away.
/// let proxy = DelayProxy::start(server.port, Duration::from_millis(5));
/// let url = proxy.url();
/// # let _ = url;
/// ```
pub struct DelayProxy {
    /// The port it listens on.
    pub port: u16,
    stop: Arc<AtomicBool>,
    upstream_chunks: Arc<AtomicU64>,
}

impl DelayProxy {
    /// Forwards to `upstream`, each chunk delivered `one_way` after it
    /// arrived (a round trip costs twice that, plus the server's time).
    pub fn start(upstream: u16, one_way: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let upstream_chunks = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&upstream_chunks);
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                pump(&client, &server, one_way, Some(Arc::clone(&counted)));
                pump(&server, &client, one_way, None);
            }
        });
        Self {
            port,
            stop,
            upstream_chunks,
        }
    }

    /// How many chunks clients have sent towards the upstream so far
    /// (counted as they arrive, before their delay): a test waits for it
    /// to grow to know that a request is on its way.
    pub fn upstream_chunks(&self) -> u64 {
        self.upstream_chunks.load(Ordering::SeqCst)
    }

    /// `redis://127.0.0.1:{port}/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to`, each chunk held until `delay` after it was
/// read, and counted in `chunks` if given.
fn pump(from: &TcpStream, to: &TcpStream, delay: Duration, chunks: Option<Arc<AtomicU64>>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if let Some(chunks) = chunks.as_ref().filter(|_| n > 0) {
                chunks.fetch_add(1, Ordering::SeqCst);
            }
            if n == 0
                || tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    thread::spawn(move || {
        for (due, bytes) in rx {
            thread::sleep(due.saturating_duration_since(Instant::now()));
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
