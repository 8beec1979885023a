//! The consumer on tokio's paused clock: every tenant at exactly 50 per
//! second, in order, a busy tenant not slowing the quiet ones.

use queue_example::{consume, per_tenant_limiter, Job};
use ratelimit_core::TokioClock;
use std::time::Duration;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn each_tenant_is_processed_at_50_per_second_in_order() {
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    // The busy tenant's 100 jobs are queued before the quiet ones' 10.
    for (tenant, jobs) in [("busy", 100), ("quiet", 10)] {
        for id in 0..jobs {
            tx.send(Job {
                tenant: tenant.into(),
                id,
            })
            .await
            .unwrap();
        }
    }
    drop(tx);
    let start = Instant::now();
    let mut done = Vec::new();
    let limiter = per_tenant_limiter().clock(TokioClock::new());
    let processed = consume(rx, &limiter, 1024, |job| {
        done.push((job, start.elapsed()));
        async {}
    })
    .await;
    assert_eq!(processed, 110);
    for (tenant, jobs) in [("busy", 100u64), ("quiet", 10)] {
        let mine: Vec<_> = done.iter().filter(|(j, _)| j.tenant == tenant).collect();
        assert_eq!(mine.len() as u64, jobs);
        for (n, (job, at)) in mine.iter().enumerate() {
            // In order; two at once, then one every 20 ms: 50 per second.
            assert_eq!(job.id, n as u64);
            let slot = n.saturating_sub(1) as u32;
            assert_eq!(*at, Duration::from_millis(20) * slot, "{tenant} job {n}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_job_does_not_lose_the_rate() {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let producer = tokio::spawn(async move {
        for id in 0..60 {
            tx.send(Job {
                tenant: "t".into(),
                id,
            })
            .await
            .unwrap();
        }
    });
    let start = Instant::now();
    let limiter = per_tenant_limiter().clock(TokioClock::new());
    let mut last = Duration::ZERO;
    let processed = consume(rx, &limiter, 16, |_job| {
        last = start.elapsed();
        // Each job takes 5 ms, well within its 20 ms slot.
        tokio::time::sleep(Duration::from_millis(5))
    })
    .await;
    producer.await.unwrap();
    assert_eq!(processed, 60);
    assert_eq!(last, Duration::from_millis(20 * 58));
}
