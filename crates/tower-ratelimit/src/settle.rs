//! [`Settlement`]: an admitted request's reservation settled to its actual cost after the response.

use crate::cost_from::{decimal, CostFrom};
use crate::cost_report::{ActualCost, CostReport, Meter};
use crate::key::KeyExtractor;
use crate::observe;
use crate::reserved::Reserved;
use crate::shared::Shared;
use http::response::Parts;
use ratelimit_core::Store;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// An admitted request's reservation, settled once to the actual cost on
/// every limit that admitted it. The actual cost is what was reported (a
/// response header, an extension, the body's count); nothing reported
/// keeps the estimate. It settles when the layer finishes with it, or when
/// its last [`CostReport`] is dropped.
pub(crate) struct Settlement<X: KeyExtractor, St: Store<X::Key>, R> {
    shared: Arc<Shared<X, St, R>>,
    reserved: Option<Reserved<X::Key>>,
    actual: AtomicU64,
    reported: AtomicBool,
}

impl<X: KeyExtractor, St: Store<X::Key>, R: Send + Sync + 'static> Settlement<X, St, R> {
    /// Starts settling `reserved`, if the layer settles costs.
    pub(crate) fn start(
        shared: &Arc<Shared<X, St, R>>,
        reserved: Option<Reserved<X::Key>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            shared: Arc::clone(shared),
            reserved,
            actual: AtomicU64::new(0),
            reported: AtomicBool::new(false),
        })
    }

    /// The report for the request's extensions, feeding also the report
    /// an outer layer lent the request.
    pub(crate) fn report(self: &Arc<Self>, outer: Option<CostReport>) -> CostReport {
        CostReport::stacked(Arc::clone(self) as Arc<dyn Meter>, outer)
    }

    /// Reads the actual cost from a response head (header, extension),
    /// or sets it to 0 when the response does not count.
    pub(crate) fn read(&self, head: &Parts, counts: bool) {
        if !counts {
            return self.set(0);
        }
        let found = match self.shared.settle.as_ref() {
            Some(CostFrom::ResponseHeader(name)) => head.headers.get(name).and_then(decimal),
            Some(CostFrom::Extension) => head.extensions.get::<ActualCost>().map(|a| a.0),
            _ => None,
        };
        if let Some(n) = found {
            self.set(n);
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
            let result = match store.settle_now(&r.key, r.cost, actual, r.at, now) {
                Some(result) => result,
                None => store.settle(&r.key, r.cost, actual, r.at, now).await,
            };
            if let Err(e) = result {
                observe::refund_error(shared.limits[i].name, &e);
            }
        }
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R: Send + Sync + 'static> Meter for Settlement<X, St, R> {
    fn add(&self, n: u64) {
        self.actual.fetch_add(n, Ordering::AcqRel);
        self.reported.store(true, Ordering::Release);
    }

    fn set(&self, n: u64) {
        self.actual.store(n, Ordering::Release);
        self.reported.store(true, Ordering::Release);
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
        let actual = if *self.reported.get_mut() {
            *self.actual.get_mut()
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
            match limit.store.settle_now(&r.key, r.cost, actual, r.at, now) {
                Some(Err(e)) => observe::refund_error(limit.name, &e),
                Some(Ok(_)) => {}
                None => {
                    let fut = limit.store.settle(&r.key, r.cost, actual, r.at, now);
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
