//! Run-time entries shared between two instances' tables through a
//! `SharedEntries` (here one in memory, handing every change to each
//! follower at once): a list entry or an override added through A's
//! handle applies on B's routes, its removal too, and an entry that is not
//! shared (added with the local methods) stays local.

use crate::common::{body_string, get_from};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use ratelimit_core::ManualClock;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::key::ClientIp;
use tower_ratelimit::table::{
    EntriesFuture, EntriesSink, EntryTable, ListKind, PolicyHandle, PolicyOptions, PolicyTable,
    SharedEntries, SharedEntry,
};

const TABLE: &str = r#"
[[limit]]
name = "daily"
algorithm = "fixed-window 2/1d"
key = "client-ip"
routes = ["/items"]
"#;

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
            sink(all.clone());
        }
    }
}

impl SharedEntries for Memory {
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
        sink(self.0.entries.lock().unwrap().clone());
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
    let router = Router::new().route("/items", get(|| async { "items" }));
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
    a.add_to_list_shared(ListKind::Deny, "198.51.100.0/24", hour)
        .await
        .unwrap();
    assert_eq!(status(&b_app, "198.51.100.7").await, StatusCode::FORBIDDEN);
    assert!(a
        .remove_from_list_shared(ListKind::Deny, "198.51.100.0/24")
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
    a.add_to_list_shared(ListKind::Allow, "203.0.113.9", hour)
        .await
        .unwrap();
    assert_eq!(status(&b_app, "203.0.113.9").await, StatusCode::OK);
    // The entry as one form writes it: removed by its other form.
    assert!(a
        .remove_from_list_shared(ListKind::Allow, "203.0.113.9/32")
        .await
        .unwrap());
    assert_eq!(
        status(&b_app, "203.0.113.9").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // An override, shared, then removed.
    a.set_override_shared(
        "daily",
        "203.0.113.9",
        "fixed-window 10/1d".parse().unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(b.runtime_overrides("daily"), 1);
    assert_eq!(status(&b_app, "203.0.113.9").await, StatusCode::OK);
    assert!(a
        .remove_override_shared("daily", "203.0.113.9")
        .await
        .unwrap());
    assert_eq!(b.runtime_overrides("daily"), 0);
    assert_eq!(
        status(&b_app, "203.0.113.9").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Bad input is refused before anything is shared.
    assert!(a
        .add_to_list_shared(ListKind::Deny, "10.0.0.0/33", hour)
        .await
        .is_err());
    assert!(a
        .set_override_shared("nope", "10.0.0.1", "gcra 1/1s".parse().unwrap())
        .await
        .is_err());
    assert!(shared.0.entries.lock().unwrap().is_empty());
    // A local entry stays local (until the next copy is handed over).
    a.add_to_list(ListKind::Deny, "192.0.2.77", hour).unwrap();
    assert_eq!(status(&b_app, "192.0.2.77").await, StatusCode::OK);
    // Sharing twice is refused.
    assert!(a.share(Arc::new(shared.clone())).is_err());
}
