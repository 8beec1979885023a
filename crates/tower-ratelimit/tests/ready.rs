//! `Limits::ready`: true while every limit can decide, on Redis or on its
//! in-memory fallback; false when Redis is away and there is no fallback,
//! logged once in a while, not once per limit and probe.

use axum::routing::get;
use axum::Router;
use ratelimit_test_support::redis_server::{skip_loudly, RedisServer};
use std::sync::{Arc, Mutex};
use tower_ratelimit::deploy::Limits;

/// Seven limits on one Redis, with `extra` in `[store]`.
fn file(url: &str, extra: &str) -> String {
    let mut text = format!("[store]\nkind = \"redis\"\nurl = \"{url}\"\n{extra}\n");
    for i in 0..7 {
        text += &format!(
            "[[limit]]\nname = \"l{i}\"\nalgorithm = \"gcra 5/1m\"\nkey = \"peer-ip\"\nroutes = [\"GET /{i}\"]\n"
        );
    }
    text
}

fn app() -> Router {
    (0..7).fold(Router::new(), |r, i| {
        r.route(&format!("/{i}"), get(|| async { "ok" }))
    })
}

/// Log lines written while the guard lives (this thread's).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_holds_in_the_fallback_and_fails_without_one() {
    let Some(mut server) = RedisServer::start() else {
        skip_loudly("no redis-server: readiness on Redis skipped");
        return;
    };
    let url = server.url();
    let with = Limits::from_toml(&file(&url, "fallback-max-keys = 1000"), None, |_| None).unwrap();
    let without = Limits::from_toml(&file(&url, ""), None, |_| None).unwrap();
    let _apps = (with.apply(app()).unwrap(), without.apply(app()).unwrap());
    assert!(with.ready().await && without.ready().await);

    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::WARN)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    server.kill();
    for _ in 0..3 {
        assert!(with.ready().await, "the fallback decides: ready");
        assert!(!without.ready().await, "nothing decides: not ready");
    }
    drop(guard);
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("not ready").count(), 1, "{text}");
}
