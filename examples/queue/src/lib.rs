//! A queue consumer that processes jobs from many tenants at 50 per second
//! per tenant: one busy tenant never slows the others down, and each
//! tenant's jobs are processed in the order they were queued.

use futures_util::StreamExt;
use ratelimit_async::Limiter;
use ratelimit_core::{Gcra, MemoryStore};
use std::time::Duration;
use tokio::sync::mpsc;

/// A job on the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Whose job it is: the rate is per tenant.
    pub tenant: String,
    /// The job's number.
    pub id: u64,
}

/// The per-tenant rate: 50 per second, one every 20 ms, with a burst of 2.
///
/// The burst of 2 absorbs the timer's lateness: with a burst of 1, each
/// wake-up a millisecond or so late would push every later job back too
/// (GCRA counts from the admission), and 50 per second would become about
/// 46; with 2, the schedule stays on the 20 ms grid, and no second ever
/// sees more than 51.
pub fn per_tenant_limiter() -> Limiter<String, MemoryStore<Gcra, String>> {
    let rate = Gcra::with_burst(50, Duration::from_secs(1), 2).expect("a valid rate");
    Limiter::new(MemoryStore::new(rate))
}

/// Consumes `queue` until it is closed and drained, handing each job to
/// `process` when its tenant's limit admits it. Reads up to `read_ahead`
/// jobs ahead, so that a tenant with a backlog doesn't block the queue.
/// Returns how many jobs were processed.
pub async fn consume<F, Fut>(
    queue: mpsc::Receiver<Job>,
    limiter: &Limiter<String, MemoryStore<Gcra, String>>,
    read_ahead: usize,
    mut process: F,
) -> u64
where
    F: FnMut(Job) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let jobs = futures_util::stream::unfold(queue, |mut queue| async move {
        queue.recv().await.map(|job| (job, queue))
    });
    let paced = limiter.pace(jobs, read_ahead, |job: &Job| job.tenant.clone());
    let mut paced = std::pin::pin!(paced);
    let mut processed = 0;
    while let Some(job) = paced.next().await {
        match job {
            Ok(job) => {
                process(job).await;
                processed += 1;
            }
            // The memory store never fails, and a cost of 1 always fits.
            Err(rejected) => eprintln!("job {:?} skipped: {}", rejected.item, rejected.error),
        }
    }
    processed
}
