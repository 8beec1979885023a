//! The axum example's admin API (`ADMIN_ADDR`, `ADMIN_TOKEN`): its
//! settings, auth (a wrong token is 401, and rate-limited), bad input
//! (400 or 404 with a problem body, never 500), and resets, bans and
//! unbans the public routes see at once, also while 64 clients hammer the
//! key.

use super::*;

const TOKEN: &str = "admin-token-0123456789";

/// The app and its admin API (on, with `TOKEN`), and the shipped limits.
fn applied() -> (Router, Router, ManualClock, Limits) {
    let (c, clock) = config("");
    let limits = limits(admin_vars(Some("127.0.0.1:0"), Some(TOKEN))).unwrap();
    let app = app_on(&limits, &c.config).unwrap();
    let api = limits.admin_router().unwrap();
    (app, api, clock, limits)
}

fn apps() -> (Router, Router, ManualClock) {
    let (app, api, clock, _) = applied();
    (app, api, clock)
}

/// `ADMIN_ADDR` and `ADMIN_TOKEN`.
fn admin_vars(
    addr: Option<&'static str>,
    token: Option<&'static str>,
) -> impl Fn(&str) -> Option<String> {
    move |v: &str| match v {
        "ADMIN_ADDR" => addr.map(str::to_owned),
        "ADMIN_TOKEN" => token.map(str::to_owned),
        _ => None,
    }
}

fn admin(method: &'static str, uri: &'static str) -> Probe {
    probe(method, uri)
        .from("127.0.0.1:5000")
        .header("authorization", format!("Bearer {TOKEN}"))
}

fn login(body: &'static str) -> Probe {
    probe("POST", "/login").from("192.0.2.77:1").body(body)
}

#[test]
fn settings_require_a_token_with_the_address() {
    let named = |e: DeployError| match e {
        DeployError::Env { var, .. } => (var, e.to_string()),
        other => panic!("{other}"),
    };
    assert!(limits(admin_vars(None, None))
        .unwrap()
        .admin_addr()
        .is_none());
    let (var, e) = named(limits(admin_vars(Some("127.0.0.1:9000"), None)).unwrap_err());
    assert_eq!(var, "ADMIN_TOKEN");
    assert!(e.contains("without a token"), "{e}");
    let (var, e) = named(limits(admin_vars(Some("127.0.0.1:9000"), Some("short"))).unwrap_err());
    assert_eq!(var, "ADMIN_TOKEN");
    assert!(!e.contains("short"), "the token is never shown: {e}");
    let (var, _) = named(limits(admin_vars(Some("nowhere"), Some(TOKEN))).unwrap_err());
    assert_eq!(var, "ADMIN_ADDR");
    let ok = limits(admin_vars(Some("127.0.0.1:9000"), Some(TOKEN))).unwrap();
    assert_eq!(ok.admin_addr().unwrap().port(), 9000);
}

#[tokio::test]
async fn a_wrong_token_is_401_and_rate_limited() {
    let (_, api, _) = apps();
    let r = probe("GET", "/limits")
        .from("127.0.0.1:5000")
        .send(&api)
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["status"], 401);
    for _ in 0..9 {
        let r = probe("GET", "/limits")
            .from("127.0.0.1:5000")
            .header("authorization", "Bearer wrong-token-0123456789")
            .send(&api)
            .await;
        assert_eq!(r.status, 401);
    }
    let r = probe("GET", "/limits")
        .from("127.0.0.1:5000")
        .header("authorization", "Bearer wrong-token-0123456789")
        .send(&api)
        .await;
    assert_eq!(r.status, 429, "{r:?}");
    // The right token from another address still works.
    let r = admin("GET", "/limits").from("127.0.0.2:1").send(&api).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn bad_input_is_400_or_404_with_a_problem_body() {
    let (_, api, _) = apps();
    for (method, uri, body, status) in [
        ("GET", "/limits/nope/keys/192.0.2.1", "", 404),
        ("GET", "/limits/login-failures/keys/not-an-ip", "", 400),
        ("PUT", "/limits/login-failures/bans/192.0.2.1", "", 400),
        (
            "PUT",
            "/limits/login-failures/bans/192.0.2.1",
            "{\"for\": \"soon\"}",
            400,
        ),
        (
            "PUT",
            "/limits/login-failures/bans/192.0.2.1",
            "{\"for\": \"0s\"}",
            400,
        ),
        ("PUT", "/limits/login-failures/bans/192.0.2.1", "[1,2]", 400),
        ("DELETE", "/limits/nope/bans/192.0.2.1", "", 404),
        ("GET", "/nothing", "", 404),
        // axum's own refusals get a problem body too.
        ("PUT", "/deny/%ff%fe", "{\"ttl\": \"1h\"}", 400),
        ("POST", "/limits", "", 405),
        ("PUT", "/limits/login-failures/keys/192.0.2.1", "", 405),
    ] {
        let r = admin(method, uri).body(body).send(&api).await;
        assert_eq!(r.status, status, "{method} {uri} {body}: {r:?}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert_eq!(r.json()["status"], status);
    }
    // A long entry (perhaps a secret key) is not echoed back.
    let long = format!("/deny/{}", "k".repeat(300));
    let r = admin("PUT", Box::leak(long.into_boxed_str()))
        .body("{\"ttl\": \"1h\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        !r.json()["detail"].as_str().unwrap().contains("kkkk"),
        "{r:?}"
    );
}

/// A client banned by the file's `ban` (its 6th failed login) is let in
/// by an unban: the admin's unban resets the key too, so the next login
/// is not denied (and banned again) by the use that led to the ban.
#[tokio::test]
async fn an_unban_lets_a_client_banned_by_its_failures_start_afresh() {
    let (app, api, _) = apps();
    for _ in 0..5 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    let r = login(LOGIN_OK).send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("3600"));
    let r = admin("DELETE", "/limits/login-failures/bans/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["reset"], true, "{r:?}");
    let r = admin("GET", "/limits/login-failures/keys/192.0.2.77")
        .send(&api)
        .await;
    assert!(r.json()["banned_seconds"].is_null(), "{r:?}");
    assert_eq!(r.json()["remaining"], 5, "{r:?}");
    assert_eq!(login(LOGIN_OK).send(&app).await.status, 200);
    assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
}

#[tokio::test]
async fn resets_bans_and_unbans_show_on_the_public_routes_at_once() {
    let (app, api, _) = apps();
    let r = admin("GET", "/limits").send(&api).await;
    assert_eq!(r.status, 200);
    let names: Vec<String> = r.json()["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"login-failures".to_owned()), "{names:?}");
    for _ in 0..5 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    let r = admin("GET", "/limits/login-failures/keys/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.json()["remaining"], 0, "{r:?}");
    // A reset: the client may fail again at once.
    let r = admin("DELETE", "/limits/login-failures/keys/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.status, 200);
    let r = admin("GET", "/limits/login-failures/keys/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.json()["remaining"], 5);
    assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    // A ban of 10 minutes, percent-encoded key and all.
    let r = admin("PUT", "/limits/login-failures/bans/192.0.2.77")
        .body("{\"for\": \"10m\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = login(LOGIN_OK).send(&app).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("600"));
    let r = admin("GET", "/limits/login-failures/keys/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.json()["banned_seconds"], 600.0, "{r:?}");
    let r = admin("DELETE", "/limits/login-failures/bans/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(login(LOGIN_OK).send(&app).await.status, 200);
    let r = admin("GET", "/limits/login-failures/keys/192.0.2.77")
        .send(&api)
        .await;
    assert!(r.json()["banned_seconds"].is_null(), "{r:?}");
    // An IPv6 /64 key, percent-encoded.
    let r = admin(
        "GET",
        "/limits/login-failures/keys/2001%3Adb8%3A1%3A2%3A%3A%2F64",
    )
    .send(&api)
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["key"], "2001:db8:1:2::/64");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ban_while_64_clients_hammer_the_key() {
    let (app, api, _) = apps();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            for _ in 0..20 {
                codes.push(login(LOGIN_OK).send(&app).await.status);
                tokio::task::yield_now().await;
            }
            codes
        }));
    }
    let r = admin("PUT", "/limits/login-failures/bans/192.0.2.77")
        .body("{\"for\": \"1h\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 200);
    for t in tasks {
        for code in t.await.unwrap() {
            assert!(code == 200 || code == 429, "{code}");
        }
    }
    // Once the ban is in, every request is refused.
    for _ in 0..10 {
        login(LOGIN_OK).send(&app).await.assert_429();
    }
}

#[tokio::test]
async fn allow_and_deny_entries_with_a_ttl() {
    let (app, api, clock) = apps();
    let r = admin("PUT", "/deny/192.0.2.0%2F24")
        .body("{\"ttl\": \"1m\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = login(LOGIN_OK).send(&app).await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.json()["status"], 403);
    let r = admin("DELETE", "/deny/192.0.2.0%2F24").send(&api).await;
    assert_eq!(r.status, 200);
    assert_eq!(login(LOGIN_OK).send(&app).await.status, 200);
    // An allow-listed client fails logins without limit, for the TTL.
    let r = admin("PUT", "/allow/192.0.2.77")
        .body("{\"ttl\": \"1h\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 200);
    for _ in 0..20 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    clock.advance(Duration::from_secs(3601));
    for _ in 0..5 {
        assert_eq!(login(LOGIN_BAD).send(&app).await.status, 401);
    }
    login(LOGIN_BAD).send(&app).await.assert_429();
    for (method, uri, body, status) in [
        ("PUT", "/allow/192.0.2.0%2F99", "{\"ttl\": \"1h\"}", 400),
        ("PUT", "/allow/192.0.2.1", "{\"for\": \"1h\"}", 400),
        ("PUT", "/other/192.0.2.1", "{\"ttl\": \"1h\"}", 404),
        ("DELETE", "/allow/192.0.2.200", "", 404),
    ] {
        let r = admin(method, uri).body(body).send(&api).await;
        assert_eq!(r.status, status, "{method} {uri}: {r:?}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
    }
}

/// `PUT /limits/{name}/overrides/{key}` gives one key its own algorithm at
/// once; it survives a reload of the file; `DELETE` gives the key back to
/// the file's limit; a bad algorithm or one that could never admit is 400.
#[tokio::test]
async fn overrides_set_at_run_time_apply_at_once_and_survive_a_reload() {
    let (app, api, _clock, limits) = applied();
    let fail = || login(LOGIN_BAD);
    let r = admin("PUT", "/limits/login-failures/overrides/192.0.2.77")
        .body("{\"algorithm\": \"sliding-log 8/1h\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    // A reload of the same file keeps the run-time override.
    limits.handle().unwrap().reload(limits.table()).unwrap();
    for n in 0..8 {
        assert_eq!(fail().send(&app).await.status, 401, "failure {n}");
    }
    fail().send(&app).await.assert_429();
    let r = admin("DELETE", "/limits/login-failures/overrides/192.0.2.77")
        .send(&api)
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["removed"], true);
    for (body, why) in [
        ("{\"algorithm\": \"gcra nonsense\"}", "Bad algorithm"),
        ("{\"for\": \"1h\"}", "Expected a JSON body"),
    ] {
        let r = admin("PUT", "/limits/login-failures/overrides/192.0.2.77")
            .body(body)
            .send(&api)
            .await;
        assert_eq!(r.status, 400, "{r:?}");
        assert!(r.body.contains(why), "{r:?}");
    }
    let r = admin("PUT", "/limits/nope/overrides/192.0.2.77")
        .body("{\"algorithm\": \"gcra 1/1s\"}")
        .send(&api)
        .await;
    assert_eq!(r.status, 404, "{r:?}");
}
