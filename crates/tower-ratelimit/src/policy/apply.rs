//! Applying a table to a router: a layer per limit, and the handle that changes them while they run.

use super::digest_overrides::DigestOverrides;
use super::entry::PolicyEntry;
use super::error::PolicyError;
use super::extractor::{ip_source, text_part, Part, PolicyExtractor, PolicyOptions};
use super::key::{KeySpec, PolicyKey};
use super::plan_book::{Extract, PlanBook};
use super::plan_directory::PlanDirectory;
use super::plan_layer::plan_layer;
use super::reload::PolicyHandle;
use super::runtime_overrides::RuntimeOverrides;
use super::store_spec::StoreSpec;
use crate::access_list::{AccessList, RuntimeLists};
use crate::limit_handle::LimitHandle;
use crate::strategy::Selection;
use crate::{LayerBuildError, RateLimitLayer};
use axum::Router;
use http::request::Parts;
use ratelimit_core::{BoxStore, Clock, LiveAlgorithm, MemoryStore, Store};
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::load::PolicyTable;
use super::pace::AddLayer;

impl PolicyTable {
    /// Adds a layer for every entry to `router` (as route layers, so they
    /// see the matched path; add every route first), the first entry
    /// outermost, and returns the router with a [`PolicyHandle`] that
    /// changes the limits while they run.
    ///
    /// `store` makes each entry's store from its [`StoreSpec`]: its name,
    /// its [`LiveAlgorithm`] (a store following it keeps the limit live)
    /// and its ban, as ratelimit-redis's `StoreSettings::build(spec.name(),
    /// spec.live(), spec.ban())` takes them. A factory that never read
    /// [`StoreSpec::live`], or the ban of a limit that has one
    /// ([`StoreSpec::ban`]), is an error naming the limit: neither the
    /// file's algorithm nor its ban is dropped in silence. A factory whose store cannot
    /// apply a field returns an error ([`StoreSpec::unsupported`]), and the
    /// table is refused with it.
    pub fn apply<St, E>(
        &self,
        router: Router,
        options: &PolicyOptions,
        mut store: impl FnMut(&StoreSpec<'_>) -> Result<St, E>,
    ) -> Result<(Router, PolicyHandle), PolicyError>
    where
        St: Store<PolicyKey, CheckFuture: Unpin, WriteFuture: Unpin>,
        E: fmt::Display,
    {
        let clock = options
            .clock
            .clone()
            .unwrap_or_else(crate::clock::default_clock);
        let runtime = Arc::new(RuntimeLists::default());
        let plans = Arc::new(PlanDirectory::new(self.plan_book(options)?));
        let settles = self.entries.iter().any(|e| e.cost_from.is_some());
        let mut layers: Vec<AddLayer> = Vec::with_capacity(self.entries.len());
        let mut live = Vec::with_capacity(self.entries.len());
        let mut handles = Vec::with_capacity(self.entries.len());
        let mut digests = Vec::with_capacity(self.entries.len());
        for (i, entry) in self.entries.iter().enumerate() {
            let fail = |message: String| PolicyError {
                file: None,
                line: None,
                entry: Some(entry.name.clone()),
                message,
            };
            let algorithm = live_algorithm(entry).map_err(fail)?;
            let store = Arc::new(entry_store(entry, &algorithm, &mut store).map_err(fail)?);
            let store_box = BoxStore::new(Arc::clone(&store));
            handles.push(limit_handle(entry, &algorithm, store_box, &clock, options));
            let learned = Arc::new(DigestOverrides::new(algorithm.clone()));
            digests.push(Arc::clone(&learned));
            live.push((entry.clone(), algorithm));
            // What an inner limit refuses takes nothing from an outer one.
            let refund_on_inner = settles && i + 1 < self.entries.len();
            let lists = (&runtime, learned, &plans.book);
            let add = self.entry_layer(entry, options, lists, store, &clock, refund_on_inner);
            layers.push(add.map_err(fail)?);
        }
        let mut router = router;
        for add in layers.into_iter().rev() {
            router = add(router);
        }
        // A route layer needs a route: without one, no request to tag.
        if !plans.book.is_empty() && router.has_routes() {
            router = plan_layer(Arc::clone(&plans.book))(router);
        }
        let handle = PolicyHandle {
            limits: live.into(),
            handles: handles.into(),
            runtime,
            digests: digests.into(),
            clock,
            reloads: AtomicU64::new(0),
            overrides: RuntimeOverrides::default(),
            shared: std::sync::OnceLock::new(),
            plans,
        };
        Ok((router, handle))
    }

    /// The table's plans, their members read (the app's lists from
    /// `options`); an error names the plan, and the key's file and line.
    fn plan_book(&self, options: &PolicyOptions) -> Result<PlanBook, PolicyError> {
        let make = |spec: &KeySpec| {
            let extract: Extract = spec.extractor(options)?;
            let parts = spec.0.iter().map(|p| text_part(p, options)).collect();
            Ok((Some(extract), parts))
        };
        let book = PlanBook::new(self.plans.plans(), &options.plan_keys, make)?;
        book.refix(book.read(&self.plans.listed)?);
        Ok(book)
    }

    /// What adds `entry`'s layer to a router: its pace layer if it paces,
    /// else its rate limit layer, as a route layer keyed by its extractor.
    fn entry_layer<St>(
        &self,
        entry: &PolicyEntry,
        options: &PolicyOptions,
        lists: Lists<'_>,
        store: Arc<St>,
        clock: &Arc<dyn Clock>,
        refund_on_inner: bool,
    ) -> Result<AddLayer, String>
    where
        St: Store<PolicyKey, CheckFuture: Unpin, WriteFuture: Unpin>,
    {
        let extractor = self.extractor(entry, options, lists, clock)?;
        if entry.pace.is_some() {
            return entry.pace_layer(extractor, store, clock);
        }
        let layer = layer(entry, extractor, store, clock, refund_on_inner);
        let layer = layer.map_err(|e| e.to_string())?;
        Ok(Box::new(move |router: Router| router.route_layer(layer)))
    }

    /// The key extractor of `entry`: its key parts, routes, tier, and its
    /// lists with the table's (and the run-time ones, and its overrides
    /// shared by digest).
    fn extractor(
        &self,
        entry: &PolicyEntry,
        options: &PolicyOptions,
        (runtime, digests, plans): Lists<'_>,
        clock: &Arc<dyn Clock>,
    ) -> Result<PolicyExtractor, String> {
        let allow = AccessList::parse(&entry.allow)?.and(&self.allow);
        let deny = AccessList::parse(&entry.deny)?.and(&self.deny);
        Ok(PolicyExtractor {
            name: Box::leak(entry.name.clone().into_boxed_str()),
            lists: !(allow.is_empty() && deny.is_empty()),
            allow,
            deny,
            ip: ip_source(&entry.key, options),
            runtime: Arc::clone(runtime),
            digests,
            clock: Arc::clone(clock),
            tier: entry.tier,
            authenticated: options.authenticated.clone(),
            routes: entry.routes.clone().into(),
            parts: entry
                .key
                .0
                .iter()
                .map(|p| Part::new(p, options))
                .collect::<Result<_, _>>()?,
            plan: (entry.plan.as_deref())
                .and_then(|name| plans.index(name))
                .map(|p| (p, Arc::clone(plans))),
        })
    }

    /// [`apply`](Self::apply) with every limit in memory, each holding at
    /// most `max_keys` keys (see
    /// [`MemoryStoreBuilder::max_keys`](ratelimit_core::store::MemoryStoreBuilder::max_keys)),
    /// live.
    pub fn apply_in_memory(
        &self,
        router: Router,
        options: &PolicyOptions,
        max_keys: Option<usize>,
    ) -> Result<(Router, PolicyHandle), PolicyError> {
        self.apply(router, options, |spec| {
            MemoryStore::<LiveAlgorithm, PolicyKey>::builder(spec.live().clone())
                .max_keys(max_keys)
                .ban(spec.ban())
                .build()
        })
    }
}

/// What an entry's extractor reads beside the request: the run-time
/// lists, its overrides shared by digest, and the plans.
type Lists<'a> = (
    &'a Arc<RuntimeLists>,
    Arc<DigestOverrides>,
    &'a Arc<PlanBook>,
);

/// The store of `entry`, made by `factory` from the entry's spec; an
/// error when the factory fails or leaves a field of the entry out.
fn entry_store<St, E: fmt::Display>(
    entry: &PolicyEntry,
    live: &LiveAlgorithm,
    factory: &mut impl FnMut(&StoreSpec<'_>) -> Result<St, E>,
) -> Result<St, String> {
    let spec = StoreSpec::new(&entry.name, live, entry.ban_policy());
    let store = factory(&spec).map_err(|e| e.to_string())?;
    match spec.dropped() {
        Some(why) => Err(why),
        None => Ok(store),
    }
}

/// The layer of `entry`, keyed by `extractor`, on `store`; with
/// `refund_on_inner`, it gives its cost back when an inner limit refuses.
fn layer<St>(
    entry: &PolicyEntry,
    extractor: PolicyExtractor,
    store: Arc<St>,
    clock: &Arc<dyn Clock>,
    refund_on_inner: bool,
) -> Result<RateLimitLayer<PolicyExtractor, St>, LayerBuildError>
where
    St: Store<PolicyKey, CheckFuture: Unpin, WriteFuture: Unpin>,
{
    let skip = |_: &Parts, key: &PolicyKey| match key {
        PolicyKey::Skip => Selection::NONE,
        _ => Selection::ALL,
    };
    let mut builder = RateLimitLayer::builder(extractor)
        .limit(entry.name.clone(), store)
        .select(skip)
        .mode(entry.mode)
        .headers(entry.headers)
        .on_key_error(entry.on_key_error);
    if let Some(cost) = entry.reserved_cost()? {
        builder = builder.cost(cost);
    }
    if let Some(from) = entry.cost_from.clone() {
        builder = builder.settle(from);
    }
    if refund_on_inner {
        builder = builder.refund_on_inner_limit();
    }
    if let Some(count) = entry.count.clone() {
        builder = builder.count_if(move |res: &http::response::Parts| count.contains(&res.status));
    }
    if let Some(reset_on) = entry.reset_on.clone().filter(|r| !r.is_empty()) {
        builder =
            builder.reset_if(move |res: &http::response::Parts| reset_on.contains(&res.status));
    }
    builder.clock(Arc::clone(clock)).build()
}

/// The live algorithm of `entry`: its algorithm and its file's overrides.
fn live_algorithm(entry: &PolicyEntry) -> Result<LiveAlgorithm, String> {
    let algorithm = LiveAlgorithm::new(entry.algorithm);
    algorithm
        .replace(entry.algorithm, &entry.override_list())
        .map_err(|e| e.to_string())?;
    Ok(algorithm)
}

/// The app's hand on `entry`'s limit: the store its layer uses, with the
/// table's clock.
fn limit_handle(
    entry: &PolicyEntry,
    live: &LiveAlgorithm,
    store: BoxStore<PolicyKey>,
    clock: &Arc<dyn Clock>,
    options: &PolicyOptions,
) -> LimitHandle {
    LimitHandle {
        name: entry.name.clone(),
        live: live.clone(),
        store,
        clock: Arc::clone(clock),
        parts: entry.key.0.iter().map(|p| text_part(p, options)).collect(),
    }
}
