//! [`RateLimitBuilder`]: several named limits, costs, selectors, modes and policies.

use crate::clock::default_clock;
use crate::key::KeyExtractor;
use crate::response::{Fields, Headers, ProblemJson};
use crate::shared::{Limit, Shared, Stripes};
use crate::strategy::{
    Cost, FailurePolicy, KeyErrorPolicy, LimitSelector, Mode, ResponsePredicate,
};
use crate::{CostFrom, LayerBuildError, RateLimitLayer};
use ratelimit_core::{Clock, Store};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Builds a [`RateLimitLayer`]; from [`RateLimitLayer::builder`].
///
/// ```
/// use ratelimit_core::{Gcra, MemoryStore, SlidingWindow};
/// use std::time::Duration;
/// use tower_ratelimit::{key::PeerIp, RateLimitLayer};
///
/// // 10 per second and 1,000 per day: a request must fit both, and
/// // consumes from neither unless it does.
/// let layer = RateLimitLayer::builder(PeerIp::new())
///     .limit("burst", MemoryStore::new(Gcra::new(10, Duration::from_secs(1)).unwrap()))
///     .limit("daily", MemoryStore::new(Gcra::new(1000, Duration::from_secs(86_400)).unwrap()))
///     .build()
///     .unwrap();
/// # let _ = layer;
/// ```
pub struct RateLimitBuilder<X: KeyExtractor, St, R = ProblemJson> {
    key: X,
    limits: Vec<(String, Arc<St>)>,
    cost: Option<Box<dyn Cost>>,
    select: Option<Box<dyn LimitSelector<X::Key>>>,
    count_if: Option<Box<dyn ResponsePredicate>>,
    reset_if: Option<Box<dyn ResponsePredicate>>,
    settle: Option<CostFrom>,
    refund_on_inner_limit: bool,
    mode: Mode,
    on_key_error: KeyErrorPolicy,
    on_store_error: FailurePolicy,
    headers: Headers,
    response: R,
    clock: Option<Arc<dyn Clock>>,
}

// The layer's constructors live beside the builder they use.
impl<X: KeyExtractor, St: Store<X::Key>> RateLimitLayer<X, St> {
    /// One limit named `default` in `store`, keyed by `key`, with the
    /// default policies: enforce, 429 problem+json, IETF headers, reject
    /// requests without a key, fail open.
    ///
    /// ```
    /// use ratelimit_core::{Gcra, MemoryStore};
    /// use std::time::Duration;
    /// use tower_ratelimit::{key::PeerIp, RateLimitLayer};
    ///
    /// let store = MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap());
    /// let layer = RateLimitLayer::new(store, PeerIp::new());
    /// # let _ = layer;
    /// ```
    pub fn new(store: St, key: X) -> Self {
        RateLimitBuilder::new(key).into_layer(Box::new([Limit::new("default", Arc::new(store))]))
    }

    /// A builder for several named limits and other policies.
    pub fn builder(key: X) -> RateLimitBuilder<X, St> {
        RateLimitBuilder::new(key)
    }
}

impl<X: KeyExtractor, St: Store<X::Key>> RateLimitBuilder<X, St> {
    pub(crate) fn new(key: X) -> Self {
        Self {
            key,
            limits: Vec::new(),
            cost: None,
            select: None,
            count_if: None,
            reset_if: None,
            settle: None,
            refund_on_inner_limit: false,
            mode: Mode::Enforce,
            on_key_error: KeyErrorPolicy::Reject,
            on_store_error: FailurePolicy::Open,
            headers: Headers::new(),
            response: ProblemJson::new(),
            clock: None,
        }
    }
}

impl<X: KeyExtractor, St: Store<X::Key>, R> RateLimitBuilder<X, St, R> {
    /// Adds a limit named `name` (1 to 64 visible ASCII characters, without
    /// quotes or braces: [`is_valid_limit_name`](ratelimit_core::plumbing::is_valid_limit_name);
    /// shown in the `RateLimit` headers) kept in `store`. A request is admitted
    /// only if every selected limit admits it; limits are checked in the
    /// order they are added.
    ///
    /// All limits of a layer share one store type: for different
    /// algorithms use `MemoryStore<AnyAlgorithm, K>` (`Gcra::new(..)?.into()`).
    ///
    /// Names are kept for the life of the program (so that every decision
    /// is `Copy` and the hot path does no reference counting): build layers
    /// once, at startup, not per request.
    ///
    /// `store` is a store, or an `Arc` of one to share it with other layers
    /// or inspect it elsewhere. An `Arc` could be the store type itself
    /// (an `Arc` of a store is a store): when no limit names the type, say
    /// it, as `RateLimitLayer::<_, MemoryStore<Gcra, IpKey>>::builder(key)`.
    pub fn limit(mut self, name: impl Into<String>, store: impl Into<Arc<St>>) -> Self {
        self.limits.push((name.into(), store.into()));
        self
    }

    /// The cost of each request (default 1): a [`Cost`] such as
    /// [`FixedCost`](crate::strategy::FixedCost), or a closure of the request
    /// head. A cost of 0 is a peek: the request passes, is counted nowhere
    /// and sees the quota left (the policy file refuses `cost = 0`). A cost
    /// above a limit's capacity is refused with a 429 that says it can
    /// never be admitted.
    ///
    /// ```
    /// # use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};
    /// # use std::time::Duration;
    /// use http::request::Parts;
    ///
    /// // Writes cost 5, reads 1.
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .limit("api", MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()))
    ///     .cost(|req: &Parts| if req.method == http::Method::GET { 1 } else { 5 })
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// ```
    pub fn cost(mut self, cost: impl Cost) -> Self {
        self.cost = Some(Box::new(cost));
        self
    }

    /// Chooses the limits per request (default: all of them): a
    /// [`LimitSelector`], or a closure of the request head and its key (of
    /// the extractor's key type).
    ///
    /// ```
    /// use http::request::Parts;
    /// use tower_ratelimit::key::{Header, HeaderKey};
    /// use tower_ratelimit::strategy::Selection;
    /// use tower_ratelimit::{Gcra, MemoryStore, RateLimitLayer};
    /// # use std::time::Duration;
    /// # let store = |n| MemoryStore::new(Gcra::new(n, Duration::from_secs(60)).unwrap());
    ///
    /// // Limit 0 for free keys, limit 1 for "pro-" keys.
    /// let layer = RateLimitLayer::builder("x-api-key".parse::<Header>().unwrap())
    ///     .limit("free", store(60))
    ///     .limit("pro", store(6000))
    ///     .select(|_req: &Parts, key: &HeaderKey| {
    ///         if key.stored().starts_with("pro-") {
    ///             Selection::only(1)
    ///         } else {
    ///             Selection::only(0)
    ///         }
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// ```
    pub fn select(mut self, selector: impl LimitSelector<X::Key>) -> Self {
        self.select = Some(Box::new(selector));
        self
    }

    /// Counts only the responses that match `predicate` (failed logins:
    /// [`StatusIs`](crate::strategy::StatusIs)`::new(StatusCode::UNAUTHORIZED)`,
    /// or a closure of the response head: `|res: &http::response::Parts|
    /// res.status.is_server_error()`).
    ///
    /// The cost is reserved before the inner service is called, so
    /// concurrent requests cannot slip past the limit (at most `L`
    /// counted requests reach the service), and refunded when the response
    /// does not count, or the service fails. A request dropped before its
    /// response keeps its reservation.
    ///
    /// ```
    /// use http::StatusCode;
    /// use ratelimit_core::{MemoryStore, SlidingLog};
    /// use std::time::Duration;
    /// use tower_ratelimit::{key::PeerIp, strategy::StatusIs, RateLimitLayer};
    ///
    /// // 5 failed logins per hour per client IP; successes are free.
    /// let failures = RateLimitLayer::builder(PeerIp::new())
    ///     .limit("login", MemoryStore::new(SlidingLog::new(5, Duration::from_secs(3600)).unwrap()))
    ///     .count_if(StatusIs::new(StatusCode::UNAUTHORIZED))
    ///     .build()
    ///     .unwrap();
    /// # let _ = failures;
    /// ```
    pub fn count_if(mut self, predicate: impl ResponsePredicate) -> Self {
        self.count_if = Some(Box::new(predicate));
        self
    }

    /// Resets the key on every limit that admitted the request when its
    /// response matches `predicate` (see [`Store::reset`]): a successful
    /// login (`StatusIs::new(StatusCode::OK)`) clears the failures counted
    /// by [`count_if`](Self::count_if). A reset gives the key's whole
    /// quota back, by design. Each request then takes the slower path
    /// that keeps its key until the response.
    ///
    /// ```
    /// use http::StatusCode;
    /// use ratelimit_core::{MemoryStore, SlidingLog};
    /// use std::time::Duration;
    /// use tower_ratelimit::{key::PeerIp, strategy::StatusIs, RateLimitLayer};
    ///
    /// // 5 failed logins per hour per client IP; a success forgets them.
    /// let failures = RateLimitLayer::builder(PeerIp::new())
    ///     .limit("login", MemoryStore::new(SlidingLog::new(5, Duration::from_secs(3600)).unwrap()))
    ///     .count_if(StatusIs::new(StatusCode::UNAUTHORIZED))
    ///     .reset_if(StatusIs::new(StatusCode::OK))
    ///     .build()
    ///     .unwrap();
    /// # let _ = failures;
    /// ```
    pub fn reset_if(mut self, predicate: impl ResponsePredicate) -> Self {
        self.reset_if = Some(Box::new(predicate));
        self
    }

    /// Settles each admitted request after its response: the cost
    /// ([`cost`](Self::cost)) is then an
    /// estimate, reserved at admission, and the actual cost read from
    /// `from` replaces it on every limit that admitted the request. Above
    /// the estimate, the difference is charged unconditionally (the key may
    /// go into debt, and its next requests are denied until it is repaid);
    /// below, it is given back. Reserve the most a call may use
    /// ([`HeaderCost`](crate::strategy::HeaderCost) with a fallback and a
    /// cap, or a fixed cost) and have the handler deliver at most
    /// [`CostReport::reserved`](crate::CostReport::reserved): a key then
    /// admits at most its limit however many calls overlap (an estimate
    /// below the actual cost lets each call in flight overdraw by the
    /// difference; see `docs/ALGORITHMS.md`, "Settlement and debt"). A response that does not count
    /// ([`count_if`](Self::count_if)) settles to 0. The `RateLimit` fields
    /// of the response show the reservation; the settlement shows on the
    /// next response. See [`CostFrom`] for when each kind settles, and
    /// what a dropped response costs. Each request takes the boxed path.
    pub fn settle(mut self, from: CostFrom) -> Self {
        self.settle = Some(from);
        self
    }

    /// Gives the cost back when a rate-limit layer inside this one (nearer
    /// the service) rejects the request, so that stacked layers with
    /// different keys (per client, then global) consume only when all
    /// admit. Each request then takes the slower, boxed path. Rejections
    /// are recognised by the [`Limited`](crate::Limited) response
    /// extension.
    pub fn refund_on_inner_limit(mut self) -> Self {
        self.refund_on_inner_limit = true;
        self
    }

    /// Enforce (default), dry-run or shape. [`build`](Self::build) refuses
    /// shape when a limit's store says it decides with another algorithm
    /// than the leaky bucket
    /// ([`Upkeep::algorithm_names`](ratelimit_core::store::Upkeep::algorithm_names)).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// What to do when no key can be extracted (default: reject).
    pub fn on_key_error(mut self, policy: KeyErrorPolicy) -> Self {
        self.on_key_error = policy;
        self
    }

    /// What to do when the store fails (default: fail open).
    pub fn on_store_error(mut self, policy: FailurePolicy) -> Self {
        self.on_store_error = policy;
        self
    }

    /// Which header fields to send.
    pub fn headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }

    /// The clock (default: a process-wide [`SystemClock`](ratelimit_core::SystemClock)),
    /// or an `Arc<dyn Clock>` shared with other layers.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(clock.into_shared());
        self
    }

    /// How rejections are answered (default: [`ProblemJson`]): a
    /// [`ResponseBuilder`](crate::response::ResponseBuilder), or a closure of
    /// the [`Rejection`](crate::response::Rejection). Its body type must be
    /// the inner service's (axum's `Body` in a `Router`).
    ///
    /// ```
    /// use axum::{body::Body, routing::get, Router};
    /// use http::{Response, StatusCode};
    /// use tower_ratelimit::response::Rejection;
    /// # use tower_ratelimit::{key::PeerIp, Gcra, MemoryStore, RateLimitLayer};
    /// # use std::time::Duration;
    ///
    /// // Plain text instead of problem+json.
    /// let layer = RateLimitLayer::builder(PeerIp::new())
    ///     .limit("api", MemoryStore::new(Gcra::new(100, Duration::from_secs(60)).unwrap()))
    ///     .response(|rejection: Rejection<'_>| {
    ///         let (status, text) = match rejection {
    ///             Rejection::Limited(_) => (StatusCode::TOO_MANY_REQUESTS, "slow down"),
    ///             Rejection::KeyError(e) => (e.status(), "who are you?"),
    ///             _ => (StatusCode::SERVICE_UNAVAILABLE, "try again later"),
    ///         };
    ///         Response::builder().status(status).body(Body::from(text)).unwrap()
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(layer);
    /// # let _ = app;
    /// ```
    pub fn response<R2>(self, response: R2) -> RateLimitBuilder<X, St, R2> {
        RateLimitBuilder {
            key: self.key,
            limits: self.limits,
            cost: self.cost,
            select: self.select,
            count_if: self.count_if,
            reset_if: self.reset_if,
            settle: self.settle,
            refund_on_inner_limit: self.refund_on_inner_limit,
            mode: self.mode,
            on_key_error: self.on_key_error,
            on_store_error: self.on_store_error,
            headers: self.headers,
            response,
            clock: self.clock,
        }
    }

    /// The layer, or why the configuration cannot work.
    pub fn build(mut self) -> Result<RateLimitLayer<X, St, R>, LayerBuildError> {
        let n = self.limits.len();
        if n == 0 {
            return Err(LayerBuildError::NoLimits);
        }
        if n > 64 {
            return Err(LayerBuildError::TooManyLimits(n));
        }
        let mut limits = Vec::with_capacity(n);
        for (name, store) in std::mem::take(&mut self.limits) {
            if !ratelimit_core::plumbing::is_valid_limit_name(&name) {
                return Err(LayerBuildError::BadLimitName(name));
            }
            if limits.iter().any(|l: &Limit<St>| l.name == name) {
                return Err(LayerBuildError::DuplicateLimitName(name));
            }
            if self.mode == Mode::Shape {
                let names = store.algorithm_names();
                if let Some(&algorithm) = names.iter().find(|&&a| a != "leaky-bucket") {
                    return Err(LayerBuildError::ShapeWithoutQueue {
                        limit: name,
                        algorithm,
                    });
                }
            }
            // Names live as long as the program: layers are built once,
            // and a `&'static str` makes every decision `Copy` (no
            // reference counting on the hot path).
            limits.push(Limit::new(Box::leak(name.into_boxed_str()), store));
        }
        Ok(self.into_layer(limits.into_boxed_slice()))
    }

    /// The layer with these (already validated) limits and this builder's
    /// policies.
    pub(crate) fn into_layer(self, limits: Box<[Limit<St>]>) -> RateLimitLayer<X, St, R> {
        let n = limits.len();
        let clock = self.clock.unwrap_or_else(default_clock);
        // Names are printable ASCII (checked by `build`, or constant).
        let fields = Fields::new(self.headers, limits.iter().map(|l| l.name))
            .expect("limit names are printable ASCII");
        crate::upkeep::spawn::<X::Key, St>(
            limits
                .iter()
                .map(|l| (l.name, Arc::downgrade(&l.store)))
                .collect(),
            Arc::clone(&clock),
        );
        RateLimitLayer {
            shared: Arc::new(Shared {
                key: self.key,
                all: if n == 64 { u64::MAX } else { (1 << n) - 1 },
                stripes: (n > 1).then(|| Stripes::new(64)),
                plain: n == 1
                    && self.mode == Mode::Enforce
                    && self.count_if.is_none()
                    && self.reset_if.is_none()
                    && self.settle.is_none()
                    && !self.refund_on_inner_limit,
                limits,
                cost: self.cost,
                select: self.select,
                count_if: self.count_if,
                reset_if: self.reset_if,
                settle: self.settle,
                refund_on_inner_limit: self.refund_on_inner_limit,
                mode: self.mode,
                on_key_error: self.on_key_error,
                on_store_error: self.on_store_error,
                fields,
                response: self.response,
                clock,
                no_peer_logged: AtomicBool::new(false),
                stray_logged: AtomicBool::new(false),
            }),
        }
    }
}
