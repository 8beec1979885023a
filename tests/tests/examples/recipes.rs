//! The Redis recipe of `tower-ratelimit` (`examples/redis_fallback.rs`) on
//! a real redis-server: two copies of its app share one limit. Its own
//! tests cover the fallback, without Redis.

use integration_tests::redis_server::RedisServer;
use std::time::Duration;

#[path = "../../../crates/tower-ratelimit/examples/redis_fallback.rs"]
#[allow(dead_code)]
mod redis_fallback;

use redis_fallback::support::from;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_fallback_recipe_shares_the_limit_through_redis() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    // A timeout no loaded debug build reaches: a slow answer must not
    // fall back to memory here.
    let patient = Duration::from_secs(5);
    let a = redis_fallback::app(&server.url(), patient).unwrap();
    let b = redis_fallback::app(&server.url(), patient).unwrap();
    let ticket = |user| from("203.0.113.7:1", "POST", "/tickets").header("authorization", user);
    assert_eq!(ticket("Bearer alice").status(&a).await, 201);
    // The other copy sees alice's ticket: 1 per 5 minutes, fleet-wide.
    let res = ticket("Bearer alice").send(&b).await;
    assert_eq!(res.status(), 429);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((299..=300).contains(&retry), "{retry}");
    assert_eq!(ticket("Bearer alice").status(&a).await, 429);
    assert_eq!(ticket("Bearer bob").status(&b).await, 201);
    assert_eq!(ticket("Bearer bob").status(&a).await, 429);
}
