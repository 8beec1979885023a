//! The name a key goes by in a store (its deny cache, leases, fallback
//! and Redis keys): its text, or a secret key's keyed hash, waiting for
//! the key secret when the store does not know it yet.

use crate::fleet::key_secret::hashed;
use crate::inner::Inner;
use crate::outage::breaker::Outcome;
use crate::outage::failure::{Failure, Kind};
use ratelimit_core::StoreError;

impl Inner {
    /// The name a key goes by in this store (its deny cache, leases,
    /// fallback and Redis key): its text, or for a secret key the keyed
    /// hash of it; `Err(text)` while the secret is not known yet.
    pub(crate) fn name(&self, text: String, secret: bool) -> Result<String, String> {
        if !secret {
            return Ok(text);
        }
        match self.conn.secret.get() {
            Some(s) => Ok(hashed(&s, &text)),
            None => Err(text),
        }
    }

    /// The name of a secret key, once the first connect has read the
    /// secret; else the failure policy applies to the call (the fallback
    /// then counts the key under its text, in memory only).
    pub(crate) async fn name_later(&self, text: String) -> Result<String, (Failure, String)> {
        // Under the breaker: no connect attempt per call while it is open,
        // and failing to connect counts like any failure.
        let Some(permit) = self.breaker.admit() else {
            let failure = Failure::new(Kind::BreakerOpen, "circuit breaker open");
            return Err((failure, text));
        };
        let waited = self.conn.get(self.timeout).await;
        let named = self.name(text, true).map_err(|text| {
            let failure = waited
                .err()
                .unwrap_or_else(|| Failure::new(Kind::Other, "no key secret read from redis yet"));
            (failure, text)
        });
        let outcome = match &named {
            Ok(_) => Outcome::Answered,
            Err(_) => Outcome::Failed,
        };
        if permit.settle(outcome) {
            self.conn.refresh();
        }
        named
    }

    /// The name of the key `text` (see [`name`](Self::name)), waiting for
    /// the key secret if needed; else the error and the text.
    pub(crate) async fn named(
        &self,
        text: String,
        secret: bool,
    ) -> Result<String, (StoreError, String)> {
        self.resolved(text, secret)
            .await
            .map_err(|(failure, text)| (failure.to_store_error(), text))
    }

    /// As [`named`](Self::named), with the failure itself (for the
    /// failure policy of a refund or a settlement).
    pub(crate) async fn resolved(
        &self,
        text: String,
        secret: bool,
    ) -> Result<String, (Failure, String)> {
        match self.name(text, secret) {
            Ok(name) => Ok(name),
            Err(text) => self.name_later(text).await,
        }
    }
}
