//! Run-time entries shared between two instances' tables through a
//! `SharedEntries` (here one in memory, handing every change to each
//! follower at once): a list entry or an override added through A's
//! handle applies on B's routes, its removal too, and an entry that is not
//! shared (added with the local methods) stays local. A list's key entry
//! and an API key's override are shared as digests only, and still match
//! on both instances.

use crate::common::{body_string, get_from};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use ratelimit_core::ManualClock;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::ClientIp;
use tower_ratelimit::policy::{
    EntriesFuture, EntriesSink, EntryDigest, EntryTable, ListKind, PolicyHandle, PolicyOptions,
    PolicyTable, SharedEntries, SharedEntry,
};

const TABLE: &str = r#"
[[limit]]
name = "daily"
algorithm = "fixed-window 2/1d"
key = "client-ip"
routes = ["/items"]

[[limit]]
name = "per-key"
algorithm = "fixed-window 2/1d"
key = "api-key"
routes = ["/keyed"]
"#;

/// The digest every instance computes (a keyed hash in Redis; here any
/// 128-bit hash will do).
fn digest() -> EntryDigest {
    EntryDigest::new(|t: &str| u128::from(ratelimit_core::algorithm::stable_hash(t)) * 3)
}

/// Entries in memory, every follower told of each change at once.
#[derive(Default)]
struct State {
    entries: Mutex<Vec<SharedEntry>>,
    sinks: Mutex<Vec<EntriesSink>>,
}

#[derive(Clone, Default)]
struct Memory(Arc<State>);

impl State {
    fn tell(&self) {
        let all = self.entries.lock().unwrap().clone();
        for sink in self.sinks.lock().unwrap().iter() {
            sink(all.clone(), digest());
        }
    }
}

impl SharedEntries for Memory {
    fn digest(&self) -> EntriesFuture<EntryDigest> {
        Box::pin(async { Ok(digest()) })
    }

    fn put(&self, entry: SharedEntry, cap: usize) -> EntriesFuture<()> {
        let me = Arc::clone(&self.0);
        Box::pin(async move {
            {
                let mut all = me.entries.lock().unwrap();
                let same = |e: &SharedEntry| {
                    e.table == entry.table && e.scope == entry.scope && e.name == entry.name
                };
                all.retain(|e| !same(e));
                if all.iter().filter(|e| e.table == entry.table).count() >= cap {
                    return Err(format!("at most {cap}"));
                }
                all.push(entry);
            }
            me.tell();
            Ok(())
        })
    }

    fn remove(&self, table: EntryTable, scope: &str, name: &str) -> EntriesFuture<bool> {
        let me = Arc::clone(&self.0);
        let (scope, name) = (scope.to_owned(), name.to_owned());
        Box::pin(async move {
            let had = {
                let mut all = me.entries.lock().unwrap();
                let before = all.len();
                all.retain(|e| !(e.table == table && e.scope == scope && e.name == name));
                all.len() < before
            };
            me.tell();
            Ok(had)
        })
    }

    fn follow(&self, sink: EntriesSink) {
        sink(self.0.entries.lock().unwrap().clone(), digest());
        self.0.sinks.lock().unwrap().push(sink);
    }
}

fn instance(shared: &Memory) -> (Router, Arc<PolicyHandle>) {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let options = PolicyOptions {
        client_ip: Some(ClientIp::new(["192.0.2.1/32"]).unwrap()),
        clock: Some(Arc::new(ManualClock::new())),
        ..PolicyOptions::default()
    };
    let router = Router::new()
        .route("/items", get(|| async { "items" }))
        .route("/keyed", get(|| async { "keyed" }));
    let (router, handle) = table.apply_in_memory(router, &options, Some(1000)).unwrap();
    let handle = Arc::new(handle);
    handle.share(Arc::new(shared.clone())).unwrap();
    (router, handle)
}

async fn status(app: &Router, client: &str) -> StatusCode {
    let req = get_from(
        "192.0.2.1:1",
        "/items",
        &[("x-forwarded-for", client.as_bytes())],
    );
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let _ = body_string(res).await;
    status
}

#[tokio::test]
async fn entries_added_through_one_handle_apply_on_the_other() {
    let shared = Memory::default();
    let (_a, a) = instance(&shared);
    let (b_app, b) = instance(&shared);
    let hour = Duration::from_secs(3600);
    // Deny, shared.
    a.add_to_list(ListKind::Deny, "198.51.100.0/24", hour)
        .await
        .unwrap();
    assert_eq!(status(&b_app, "198.51.100.7").await, StatusCode::FORBIDDEN);
    assert!(a
        .remove_from_list(ListKind::Deny, "198.51.100.0/24")
        .await
        .unwrap());
    assert_eq!(status(&b_app, "198.51.100.7").await, StatusCode::OK);
    // Allow, shared: a client at its limit passes on B.
    for _ in 0..2 {
        assert_eq!(status(&b_app, "203.0.113.9").await, StatusCode::OK);
    }
    assert_eq!(
        status(&b_app, "203.0.113.9").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    a.add_to_list(ListKind::Allow, "203.0.113.9", hour)
        .await
        .unwrap();
    assert_eq!(status(&b_app, "203.0.113.9").await, StatusCode::OK);
    // The entry as one form writes it: removed by its other form.
    assert!(a
        .remove_from_list(ListKind::Allow, "203.0.113.9/32")
        .await
        .unwrap());
    assert_eq!(
        status(&b_app, "203.0.113.9").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // An override, shared, then removed.
    a.set_override(
        "daily",
        "203.0.113.9",
        "fixed-window 10/1d".parse().unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(b.runtime_overrides("daily"), 1);
    assert_eq!(status(&b_app, "203.0.113.9").await, StatusCode::OK);
    assert!(a.remove_override("daily", "203.0.113.9").await.unwrap());
    assert_eq!(b.runtime_overrides("daily"), 0);
    assert_eq!(
        status(&b_app, "203.0.113.9").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Bad input is refused before anything is shared.
    assert!(a
        .add_to_list(ListKind::Deny, "10.0.0.0/33", hour)
        .await
        .is_err());
    assert!(a
        .set_override("nope", "10.0.0.1", "gcra 1/1s".parse().unwrap())
        .await
        .is_err());
    assert!(shared.0.entries.lock().unwrap().is_empty());
    // Sharing twice is refused.
    assert!(a.share(Arc::new(shared.clone())).is_err());
}

/// `GET /keyed` with the API key `key`: its status.
async fn keyed(app: &Router, key: &str) -> StatusCode {
    let req = get_from("192.0.2.1:1", "/keyed", &[("x-api-key", key.as_bytes())]);
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let _ = body_string(res).await;
    status
}

/// Uses up `key`'s 2 a day on `app`.
async fn exhaust(app: &Router, key: &str) {
    for _ in 0..2 {
        assert_eq!(keyed(app, key).await, StatusCode::OK);
    }
    assert_eq!(keyed(app, key).await, StatusCode::TOO_MANY_REQUESTS);
}

/// Whether any shared entry holds `text`.
fn holds(shared: &Memory, text: &str) -> bool {
    let all = shared.0.entries.lock().unwrap();
    all.iter()
        .any(|e| e.name.contains(text) || e.value.contains(text))
}

#[tokio::test]
async fn secret_keys_are_shared_as_digests_and_match_on_both() {
    let shared = Memory::default();
    let (a_app, a) = instance(&shared);
    let (b_app, b) = instance(&shared);
    let hour = Duration::from_secs(3600);
    // An override of an API key: its digest only, applied on B by it, on
    // A too once A's own copy replaced what A set.
    exhaust(&b_app, "sk-live-override").await;
    exhaust(&a_app, "sk-live-override").await;
    a.set_override(
        "per-key",
        "sk-live-override",
        "fixed-window 10/1d".parse().unwrap(),
    )
    .await
    .unwrap();
    assert!(!holds(&shared, "sk-live"));
    assert!(shared.0.entries.lock().unwrap()[0].name == digest().of("sk-live-override"));
    assert_eq!(keyed(&b_app, "sk-live-override").await, StatusCode::OK);
    assert_eq!(keyed(&a_app, "sk-live-override").await, StatusCode::OK);
    assert_eq!(keyed(&b_app, "sk-live-other").await, StatusCode::OK);
    // Removed through B (which never had its text but from requests).
    assert!(b
        .remove_override("per-key", "sk-live-override")
        .await
        .unwrap());
    for app in [&a_app, &b_app] {
        let status = keyed(app, "sk-live-override").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    }
    assert!(shared.0.entries.lock().unwrap().is_empty());
    // A deny entry that is a key: its digest only; 403 on both.
    a.add_to_list(ListKind::Deny, "sk-live-denied", hour)
        .await
        .unwrap();
    assert!(!holds(&shared, "sk-live"));
    for app in [&a_app, &b_app] {
        assert_eq!(keyed(app, "sk-live-denied").await, StatusCode::FORBIDDEN);
    }
    assert_eq!(keyed(&b_app, "sk-live-fine").await, StatusCode::OK);
    // An allow entry: a key at its limit passes on both (each instance
    // counts in its own memory here).
    exhaust(&a_app, "sk-live-vip").await;
    exhaust(&b_app, "sk-live-vip").await;
    b.add_to_list(ListKind::Allow, "sk-live-vip", hour)
        .await
        .unwrap();
    assert!(!holds(&shared, "sk-live"));
    for app in [&a_app, &b_app] {
        assert_eq!(keyed(app, "sk-live-vip").await, StatusCode::OK);
    }
    // Removed by their text, through either instance.
    assert!(a
        .remove_from_list(ListKind::Allow, "sk-live-vip")
        .await
        .unwrap());
    assert!(b
        .remove_from_list(ListKind::Deny, "sk-live-denied")
        .await
        .unwrap());
    assert!(shared.0.entries.lock().unwrap().is_empty());
    assert_eq!(
        keyed(&b_app, "sk-live-vip").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(keyed(&a_app, "sk-live-denied").await, StatusCode::OK);
    // An address's entries and a client-ip limit's overrides stay text.
    a.add_to_list(ListKind::Deny, "192.0.2.99", hour)
        .await
        .unwrap();
    a.set_override("daily", "192.0.2.98", "fixed-window 10/1d".parse().unwrap())
        .await
        .unwrap();
    assert!(holds(&shared, "192.0.2.99/32") && holds(&shared, "192.0.2.98"));
}
