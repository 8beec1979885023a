//! `ban` in a policy table: once the limit denies an IP, it stays at 429
//! for the ban, with `Retry-After` the ban's remaining time and a body
//! saying it is a ban; escalation; bad ban settings refused at load, and
//! bans on keys that are not one client's refused unless `ban-any-key`.

use crate::common::{body_string, get_from};
use axum::http::{Method, StatusCode};
use axum::routing::post;
use axum::Router;
use ratelimit_core::ManualClock;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};

const TABLE: &str = r#"
[[limit]]
name = "login"
algorithm = "fixed-window 2/2s"
key = "client-ip"
routes = ["POST /login"]
count = [401]
ban = "6s"
"#;

fn app(table: &str, clock: &ManualClock) -> Router {
    let table = PolicyTable::from_toml(table, None).unwrap();
    let options = PolicyOptions {
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    let router = Router::new().route("/login", post(|| async { StatusCode::UNAUTHORIZED }));
    table
        .apply_in_memory(router, &options, Some(1000))
        .unwrap()
        .0
}

async fn login(app: &Router) -> (StatusCode, Option<u64>, String) {
    let mut req = get_from("10.0.0.1:1", "/login", &[]);
    *req.method_mut() = Method::POST;
    let res = app.clone().oneshot(req).await.unwrap();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (res.status(), retry, body_string(res).await)
}

#[tokio::test]
async fn a_ban_holds_an_ip_at_429_past_the_window_then_lets_it_try_again() {
    let clock = ManualClock::new();
    let app = app(TABLE, &clock);
    assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
    // The third attempt is denied: the ban starts.
    let (status, retry, body) = login(&app).await;
    assert_eq!((status, retry), (StatusCode::TOO_MANY_REQUESTS, Some(6)));
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["banned"], true, "{body}");
    assert_eq!(body["retry_after"], 6);
    // 3 s after the second failure the window has turned over; the ban
    // still holds.
    clock.advance(Duration::from_secs(3));
    let (status, retry, _) = login(&app).await;
    assert_eq!((status, retry), (StatusCode::TOO_MANY_REQUESTS, Some(3)));
    // After 7 s the IP may try again.
    clock.advance(Duration::from_secs(4));
    assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn repeat_offences_escalate() {
    let clock = ManualClock::new();
    let table = format!("{TABLE}ban-escalate = 2.0\nban-max = \"20s\"\nban-forgive = \"1m\"\n");
    let app = app(&table, &clock);
    let mut bans = Vec::new();
    for _ in 0..4 {
        assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
        let (status, retry, _) = login(&app).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        bans.push(retry.unwrap());
        clock.advance(Duration::from_secs(retry.unwrap()));
    }
    assert_eq!(bans, [6, 12, 20, 20]);
}

#[test]
fn bad_ban_settings_are_refused_naming_them() {
    for (extra, needle) in [
        ("ban = \"0s\"", "expected 1ms to 366d"),
        ("ban = \"soon\"", "bad duration"),
        ("ban = \"1h\"\nban-escalate = 0.5", "ban-escalate 0.5"),
        ("ban = \"1h\"\nban-max = \"1m\"", "ban-max"),
        ("ban-max = \"1h\"", "need a ban"),
        ("ban-any-key = true", "need a ban"),
    ] {
        let text = TABLE.replace("ban = \"6s\"", extra);
        let e = PolicyTable::from_toml(&text, None).unwrap_err().to_string();
        assert!(e.contains(needle) && e.contains("login"), "{extra}: {e}");
    }
}

/// `TABLE` with its key, `count` line and `ban-any-key` set.
fn with_key(key: &str, count: Option<&str>, any_key: bool) -> String {
    let count = count.map_or(String::new(), |c| format!("count = {c}"));
    let text = TABLE
        .replace("key = \"client-ip\"", &format!("key = {key:?}"))
        .replace("count = [401]", &count);
    if any_key {
        format!("{text}ban-any-key = true\n")
    } else {
        text
    }
}

/// A ban on a key many clients share (`global`, `route`, a header's
/// value, an address prefix wider than a site, a composite of them) is refused at load, naming the limit, its
/// line and the key; so is one on a credential counted on failures.
#[test]
fn a_ban_on_a_key_that_is_not_one_clients_is_refused() {
    for (key, count, needle) in [
        ("global", Some("[401]"), "every client shares it"),
        ("route", Some("[401]"), "every client shares it"),
        ("global+route", None, "every client shares it"),
        ("header:x-user", Some("[401]"), "any value of x-user"),
        ("header:x-user", Some("[200]"), "any value of x-user"),
        ("route+header:x-user", Some("[401]"), "any value of x-user"),
        ("bearer", Some("[401]"), "count has 401, a failure"),
        ("api-key", Some("[200, 403]"), "count has 403, a failure"),
        ("secret-header:x-token", Some("[500]"), "count has 500"),
        ("bearer+route", None, "every response counts"),
        ("client-ip(v4/8, v6/64)", Some("[401]"), "wider than a site"),
        ("peer-ip(v4/23, v6/64)", Some("[401]"), "wider than a site"),
        (
            "client-ip(v4/32, v6/32)",
            Some("[401]"),
            "wider than a site",
        ),
        ("client-ip(v4/16, v6/64)+route", None, "wider than a site"),
    ] {
        let e = PolicyTable::from_toml(&with_key(key, count, false), None).unwrap_err();
        assert_eq!(e.entry.as_deref(), Some("login"), "{key}: {e}");
        assert_eq!(e.line, Some(2), "{key}: {e}");
        let text = e.to_string();
        assert!(text.contains(needle), "{key}: {text}");
        assert!(text.contains(&format!("key {key:?}")), "{key}: {text}");
        assert!(text.contains("ban-any-key = true"), "{key}: {text}");
        // The opt-in loads it.
        let table = PolicyTable::from_toml(&with_key(key, count, true), None).unwrap();
        assert!(table.entry("login").unwrap().ban_any_key);
    }
}

/// A ban on a key naming one client (an address, a network, an app key,
/// a composite with one) loads as before; so does a credential counted
/// on successes only.
#[test]
fn a_ban_on_one_clients_key_loads() {
    for (key, count) in [
        ("client-ip", Some("[401]")),
        ("peer-ip", Some("[401]")),
        ("client-ip(v4/24, v6/48)", None),
        ("client-ip(v4/8)+app:user", Some("[401]")),
        ("peer-ip(v6/56)", Some("[401]")),
        ("client-ip+route", Some("[401]")),
        ("client-ip+bearer", Some("[401]")),
        ("app:user", Some("[401]")),
        ("app:user+global", None),
        ("bearer", Some("[200]")),
        ("api-key", Some("[200, 201, 302]")),
    ] {
        let table = PolicyTable::from_toml(&with_key(key, count, false), None)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(table.entry("login").unwrap().ban.is_some(), "{key}");
    }
}

/// Without the opt-in, a shared key's ban would ban every client: one
/// client's failures stop another's correct login.
#[tokio::test]
async fn with_the_opt_in_a_global_ban_bans_every_client() {
    let clock = ManualClock::new();
    let app = app(&with_key("global", Some("[401]"), true), &clock);
    for _ in 0..2 {
        assert_eq!(login(&app).await.0, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(login(&app).await.0, StatusCode::TOO_MANY_REQUESTS);
    let mut req = get_from("10.9.9.9:1", "/login", &[]);
    *req.method_mut() = Method::POST;
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// A store factory that never reads the limit's ban: the table is refused,
/// naming the limit, instead of running without the ban. A factory whose
/// store cannot ban refuses it itself, naming the limit and the field.
#[test]
fn a_ban_the_store_factory_drops_is_refused() {
    use ratelimit_core::{LiveAlgorithm, MemoryStore};
    use std::convert::Infallible;
    use tower_ratelimit::policy::{PolicyKey, StoreSpec};
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let router = || Router::new().route("/login", post(|| async { "ok" }));
    let options = PolicyOptions::default();
    let dropping = |spec: &StoreSpec| {
        Ok::<_, Infallible>(MemoryStore::<LiveAlgorithm, PolicyKey>::new(
            spec.live().clone(),
        ))
    };
    let err = table.apply(router(), &options, dropping).err().unwrap();
    let text = err.to_string();
    assert!(text.contains("\"login\"") && text.contains("ban"), "{text}");
    let cannot = |spec: &StoreSpec| match spec.ban() {
        Some(_) => Err(spec.unsupported("ban")),
        None => Ok(MemoryStore::<LiveAlgorithm, PolicyKey>::new(
            spec.live().clone(),
        )),
    };
    let err = table.apply(router(), &options, cannot).err().unwrap();
    assert!(
        err.to_string().contains("its store cannot apply ban"),
        "{err}"
    );
    assert!(err.to_string().contains("\"login\""), "{err}");
    let keeping = |spec: &StoreSpec| {
        Ok::<_, Infallible>(
            MemoryStore::<LiveAlgorithm, PolicyKey>::builder(spec.live().clone())
                .ban(spec.ban())
                .build()
                .unwrap(),
        )
    };
    assert!(table.apply(router(), &options, keeping).is_ok());
}

/// A store factory that never reads the limit's algorithm (its store
/// limits by settings of its own): the table is refused, naming the
/// limit, instead of running without the file's algorithm.
#[test]
fn an_algorithm_the_store_factory_drops_is_refused() {
    use ratelimit_core::{Gcra, MemoryStore};
    use std::time::Duration;
    use tower_ratelimit::policy::{PolicyKey, StoreSpec};
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let router = || Router::new().route("/login", post(|| async { "ok" }));
    let own = |spec: &StoreSpec| {
        MemoryStore::<Gcra, PolicyKey>::builder(Gcra::new(100, Duration::from_secs(1)).unwrap())
            .ban(spec.ban())
            .build()
    };
    let err = table
        .apply(router(), &PolicyOptions::default(), own)
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("\"login\"") && text.contains("StoreSpec::live"),
        "{text}"
    );
}
