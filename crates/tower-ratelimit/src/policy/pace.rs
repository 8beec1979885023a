//! A `[[limit]]`'s `pace`, `pace-after` and `pace-piece`: a limit that paces bodies instead of refusing requests, its checks, and its layer.

use super::entry::PolicyEntry;
use super::extractor::PolicyExtractor;
use super::key::PolicyKey;
use crate::pace::{PaceLayer, PacedBody, MAX_PIECE};
use axum::body::{Body, Bytes};
use axum::Router;
use ratelimit_core::{AnyAlgorithm, Clock, Store};
use std::sync::Arc;

/// The piece size of a paced limit without `pace-piece`: 16 KiB.
pub const DEFAULT_PACE_PIECE: u64 = 16 << 10;

/// Adds one entry's layer to a router.
pub(super) type AddLayer = Box<dyn FnOnce(Router) -> Router>;

/// Whether `algorithm` gives a steady rate to pace bytes by: GCRA and the
/// token bucket do.
fn paces(algorithm: &AnyAlgorithm) -> bool {
    matches!(
        algorithm,
        AnyAlgorithm::Gcra(_) | AnyAlgorithm::TokenBucket(_)
    )
}

impl PolicyEntry {
    /// Why the entry's `pace`, `pace-after` and `pace-piece` cannot work,
    /// if they cannot: pace settings without `pace`, an algorithm with no
    /// steady rate (here or in an override), a piece of 0 or above
    /// [`MAX_PIECE`], or a field of refused requests on a limit that
    /// refuses none.
    pub(super) fn checked_pace(&self) -> Result<(), String> {
        if self.pace.is_none() {
            if self.pace_after.is_some() || self.pace_piece.is_some() {
                return Err("pace-after and pace-piece need pace".to_owned());
            }
            return Ok(());
        }
        let algorithm = std::iter::once(&self.algorithm).chain(self.overrides.values());
        if let Some(a) = algorithm.into_iter().find(|a| !paces(a)) {
            return Err(format!(
                "pace needs a steady rate, from gcra or token-bucket: {:?} has none \
                 (a window lets its whole limit through at once; a leaky bucket queues requests)",
                ratelimit_core::Algorithm::name(a)
            ));
        }
        match self.pace_piece {
            Some(0) => return Err("pace-piece = 0 sends nothing: give 1 byte or more".to_owned()),
            Some(n) if n > MAX_PIECE => {
                return Err(format!(
                    "pace-piece = {n} is above the most, {MAX_PIECE} bytes"
                ))
            }
            _ => {}
        }
        let refusing = [
            (self.mode != crate::strategy::Mode::Enforce, "mode"),
            (self.cost != 1, "cost"),
            (self.estimate.is_some(), "estimate"),
            (self.max_cost.is_some(), "max-cost"),
            (self.cost_from.is_some(), "cost-from"),
            (self.count.is_some(), "count"),
            (self.reset_on.is_some(), "reset-on"),
            (self.ban.is_some(), "ban"),
        ];
        match refusing.iter().find(|(set, _)| *set) {
            Some((_, field)) => Err(format!(
                "{field} does not go with pace: a paced limit charges each body's bytes and refuses no request"
            )),
            None => Ok(()),
        }
    }

    /// The entry's pace layer (with its `pace`, default responses), keyed
    /// by `extractor` in `store`.
    pub(super) fn pace_layer<St>(
        &self,
        extractor: PolicyExtractor,
        store: Arc<St>,
        clock: &Arc<dyn Clock>,
    ) -> Result<AddLayer, String>
    where
        St: Store<PolicyKey>,
    {
        let paced = self.pace.unwrap_or_default();
        let piece = self.pace_piece.unwrap_or(DEFAULT_PACE_PIECE);
        let layer = PaceLayer::builder(self.name.clone(), store, extractor, piece)
            .paced(paced)
            .after(self.pace_after.unwrap_or(0))
            .on_key_error(self.on_key_error)
            .clock(Arc::clone(clock))
            .skip(|key| matches!(key, PolicyKey::Skip))
            .build();
        let layer = layer.map_err(|e| e.to_string())?;
        Ok(Box::new(move |router: Router| {
            let body = tower_layer::layer_fn(|inner| AxumBody { inner });
            router.route_layer(tower_layer::Stack::new(body, layer))
        }))
    }
}

/// Hands the route an axum `Body`: an unpaced request body as it came (a
/// length limit's error stays the one axum answers with 413), a paced one
/// boxed.
#[derive(Clone)]
struct AxumBody<S> {
    inner: S,
}

impl<S, B> tower_service::Service<http::Request<PacedBody<B>>> for AxumBody<S>
where
    S: tower_service::Service<http::Request<Body>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<PacedBody<B>>) -> Self::Future {
        self.inner.call(req.map(|body| match body.into_unpaced() {
            Ok(body) => Body::new(body),
            Err(paced) => Body::new(http_body_util::BodyExt::map_err(paced, unwrapped)),
        }))
    }
}

/// A paced body's error as axum's extractors look for it: an
/// `axum::Error` from the body inside is unwrapped, so that a length
/// limit's error is one level down (413), not two (400).
fn unwrapped(e: impl Into<axum::BoxError>) -> axum::BoxError {
    let e: axum::BoxError = e.into();
    match e.downcast::<axum::Error>() {
        Ok(axum) => axum.into_inner(),
        Err(e) => e,
    }
}
