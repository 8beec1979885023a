//! Two stores on separate connections, 64 concurrent tasks on one key:
//! exactly the limit is admitted.

use crate::server;
use ratelimit_core::{
    AnyAlgorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use ratelimit_redis::RedisStore;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_two_stores_admit_exactly_the_limit() {
    let server = server!();
    let hour = Duration::from_secs(3600);
    let cases: [(AnyAlgorithm, u64); 6] = [
        (Gcra::new(50, hour).unwrap().into(), 50),
        (TokenBucket::new(50, 1, hour).unwrap().into(), 50),
        (LeakyBucket::new(1, hour, 49).unwrap().into(), 50),
        (FixedWindow::new(50, hour).unwrap().into(), 50),
        (SlidingLog::new(50, hour).unwrap().into(), 50),
        (SlidingWindow::new(50, hour).unwrap().into(), 50),
    ];
    for (algorithm, expected) in cases {
        let build = || {
            RedisStore::builder(server.url(), algorithm)
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap()
        };
        let (a, b) = (build(), build());
        let total = crate::harness::admitted_by_tasks(&a, &b, "shared", 64, 3).await;
        assert_eq!(total, expected, "{algorithm:?}");
    }
}
