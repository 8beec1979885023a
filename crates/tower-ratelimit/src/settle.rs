//! [`Settlement`]: an admitted request's reservation settled to its actual cost after the response.

use crate::cost_from::CostFrom;
use crate::cost_report::{ActualCost, CostReport, Meter};
use crate::decimal::decimal;
use crate::key::KeyExtractor;
use crate::observe;
use crate::reserved::Reserved;
use crate::shared::Shared;
use http::response::Parts;
use ratelimit_core::Store;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// An admitted request's reservation, settled once to the actual cost on
/// every limit that admitted it. The actual cost is the larger of what
/// was added on its [`CostReport`] and what was read from the response
/// (a header, an extension, a trailer), so neither erases the other; a
/// value read that is not a decimal counts as the reservation. Nothing
/// counted keeps the estimate. It settles when the layer finishes with
/// it, or when its last [`CostReport`] is dropped.
pub(crate) struct Settlement<X: KeyExtractor, St: Store<X::Key>, R> {
    shared: Arc<Shared<X, St, R>>,
    reserved: Option<Reserved<X::Key>>,
    /// The reservation's cost, kept for [`CostReport::reserved`].
    cost: u64,
    /// The sum added on the report (or the last value set).
    added: AtomicU64,
    /// The largest value read from the response.
    floor: AtomicU64,
    /// Whether anything was counted (added, set or read).
    counted: AtomicBool,
}

impl<X: KeyExtractor, St: Store<X::Key>, R: Send + Sync + 'static> Settlement<X, St, R> {
    /// Starts settling `reserved`, if the layer settles costs.
    pub(crate) fn start(
        shared: &Arc<Shared<X, St, R>>,
        reserved: Option<Reserved<X::Key>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            shared: Arc::clone(shared),
            cost: reserved.as_ref().map_or(0, |r| r.cost),
            reserved,
            added: AtomicU64::new(0),
            floor: AtomicU64::new(0),
            counted: AtomicBool::new(false),
        })
    }

    /// The report for the request's extensions, feeding also the report
    /// an outer layer lent the request.
    pub(crate) fn report(self: &Arc<Self>, outer: Option<CostReport>) -> CostReport {
        CostReport::stacked(Arc::clone(self) as Arc<dyn Meter>, outer)
    }

    /// Reads the actual cost from a response head (header, extension),
    /// or sets it to 0 when the response does not count.
    pub(crate) fn read_head(&self, head: &Parts, counts: bool) {
        if !counts {
            return self.set(0);
        }
        let found = match self.shared.settle.as_ref() {
            Some(CostFrom::ResponseHeader(name)) => head.headers.get(name).map(decimal),
            Some(CostFrom::Extension) => head.extensions.get::<ActualCost>().map(|a| Some(a.0)),
            _ => None,
        };
        if let Some(value) = found {
            self.read(value);
        }
    }

    /// Settles now if the layer holds the last handle (no report lent
    /// out lives on); otherwise the last report's drop settles.
    pub(crate) async fn finish(this: Arc<Self>) {
        let Some(mut this) = Arc::into_inner(this) else {
            return;
        };
        let Some((r, actual)) = this.take() else {
            return;
        };
        let shared = &*this.shared;
        let now = shared.clock.now();
        for &i in &r.limits {
            let store = &shared.limits[i].store;
            let result = store.settle(&r.key, r.cost, actual, r.at, now).await;
            if let Err(e) = result {
                observe::refund_error(shared.limits[i].name, &e);
            }
        }
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R: Send + Sync + 'static> Meter for Settlement<X, St, R> {
    fn add(&self, n: u64) {
        // Saturating: a sum past u64 is more than any capacity anyway.
        let _ = self
            .added
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| {
                Some(a.saturating_add(n))
            });
        self.counted.store(true, Ordering::Release);
    }

    fn set(&self, n: u64) {
        self.added.store(n, Ordering::Release);
        self.counted.store(true, Ordering::Release);
    }

    fn read(&self, value: Option<u64>) {
        let n = value.unwrap_or_else(|| {
            observe::malformed_cost(self.shared.limits[0].name);
            self.cost
        });
        self.floor.fetch_max(n, Ordering::AcqRel);
        self.counted.store(true, Ordering::Release);
    }

    fn reserved(&self) -> u64 {
        self.cost
    }

    fn cost_from(&self) -> &CostFrom {
        self.shared
            .settle
            .as_ref()
            .expect("a settlement is made only by a layer that settles")
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R> Settlement<X, St, R> {
    /// The reservation and its actual cost, once; `None` when there is
    /// nothing to change (settled already, or the estimate stands).
    fn take(&mut self) -> Option<(Reserved<X::Key>, u64)> {
        let r = self.reserved.take()?;
        let actual = if *self.counted.get_mut() {
            (*self.added.get_mut()).max(*self.floor.get_mut())
        } else {
            r.cost
        };
        (actual != r.cost).then_some((r, actual))
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R> Drop for Settlement<X, St, R> {
    /// The last handle went away before the layer settled (a report that
    /// outlived the response, or a dropped response): settles in place,
    /// or in the background for a remote store.
    fn drop(&mut self) {
        let Some((r, actual)) = self.take() else {
            return;
        };
        let now = self.shared.clock.now();
        for &i in &r.limits {
            let limit = &self.shared.limits[i];
            match limit
                .store
                .settle(&r.key, r.cost, actual, r.at, now)
                .into_ready()
            {
                Ok(Err(e)) => observe::refund_error(limit.name, &e),
                Ok(Ok(_)) => {}
                Err(fut) => {
                    let name = limit.name;
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        rt.spawn(async move {
                            if let Err(e) = fut.await {
                                observe::refund_error(name, &e);
                            }
                        });
                    }
                }
            }
        }
    }
}
