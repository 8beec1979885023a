//! The axum example on Redis: two apps, each with its own connections (as
//! two processes would have), admit the configured limits together; with
//! Redis killed they fail open, and sharing resumes once it is back.

use super::*;
use integration_tests::redis_server::RedisServer;

/// Starts a server, or returns from the test (see `RedisServer::start`).
macro_rules! server {
    () => {
        match RedisServer::start() {
            Some(s) => s,
            None => return,
        }
    };
}

/// Two independent apps on `server`, with the stores' default timeout
/// (50 ms) unless `timeout` is given. Time comes from Redis, so the apps'
/// clocks don't matter.
fn two_apps(server: &RedisServer, timeout: Option<Duration>) -> [Router; 2] {
    let app = || {
        let config = Config {
            api_keys: test_keys(),
            ..Config::default()
        };
        let setup = Setup {
            config,
            proxies: "",
        };
        app_on_redis(&setup, &server.url(), timeout)
    };
    [app(), app()]
}

/// Waits (at most 15 s) until POST /accounts from a fresh client IP, in a
/// fresh /24, is limited across both apps: 201, 201, then 429 from each.
async fn until_accounts_shared(apps: &[Router; 2], round: &mut u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        *round += 1;
        // A /24 per round: the shipped file limits a /24 to 20 accounts a
        // day, which rounds decided apart (in memory) could use up.
        let peer = leak(format!("198.18.{}.{}:1", *round % 250, *round / 250 + 1));
        let mut codes = Vec::new();
        for app in [&apps[0], &apps[1], &apps[0], &apps[1]] {
            codes.push(probe("POST", "/accounts").from(peer).send(app).await.status);
        }
        if codes == [201, 201, 429, 429] {
            return;
        }
        assert!(codes.iter().all(|&c| c < 500), "{codes:?}");
        assert!(
            std::time::Instant::now() < deadline,
            "limits not shared within 15 s: {codes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (at most 20 s) until each app counts 2 instances for every
/// limit (`GET /ready`; announced through Redis every second).
async fn until_counted(apps: &[Router; 2]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut counts = Vec::new();
        for app in apps {
            let ready = probe("GET", "/ready").send(app).await.json();
            let stores = ready["stores"].as_array().unwrap().clone();
            counts.extend(stores.iter().map(|s| s["instances"].as_u64().unwrap()));
        }
        if counts.iter().all(|&k| k == 2) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not counted within 20 s: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A timeout no loaded debug build reaches: a late answer must not be
/// mistaken for an outage (that is `fail_open_when_redis_dies`'s subject).
const PATIENT: Duration = Duration::from_secs(5);

/// `n` copies of `probe` sent at once, alternately to each app; the
/// statuses, in order of sending.
async fn concurrently(apps: &[Router; 2], n: usize, probe: impl Fn() -> Probe) -> Vec<u16> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let app = apps[i % 2].clone();
            let probe = probe();
            tokio::spawn(async move { probe.send(&app).await.status })
        })
        .collect();
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    codes
}

fn count(codes: &[u16], status: u16) -> usize {
    codes.iter().filter(|&&c| c == status).count()
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apps_on_one_redis_admit_exactly_the_limits() {
    let server = server!();
    let apps = two_apps(&server, Some(PATIENT));
    let [a, b] = &apps;

    // POST /accounts: 2 per client IP, whichever app is asked.
    let account = || probe("POST", "/accounts").from("192.0.2.1:1");
    assert_eq!(account().send(a).await.status, 201);
    assert_eq!(account().send(b).await.status, 201);
    let r = account().send(a).await;
    r.assert_429();
    assert_eq!(r.header("retry-after"), Some("86400"));
    account().send(b).await.assert_429();
    let codes = concurrently(&apps, 40, || probe("POST", "/accounts").from("192.0.2.2:1")).await;
    assert_eq!(count(&codes, 201), 2, "{codes:?}");
    assert_eq!(count(&codes, 429), 38, "{codes:?}");

    // POST /tickets: 1 per user; the other app sees the wait.
    let ticket =
        |user: &str| probe("POST", "/tickets").header("authorization", format!("Bearer {user}"));
    assert_eq!(ticket("alice").send(b).await.status, 201);
    let r = ticket("alice").send(a).await;
    r.assert_429();
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((299..=300).contains(&retry), "{r:?}");
    assert_eq!(ticket("bob").send(a).await.status, 201);
    let codes = concurrently(&apps, 20, || ticket("carol")).await;
    assert_eq!(count(&codes, 201), 1, "{codes:?}");
    assert_eq!(count(&codes, 429), 19, "{codes:?}");
    assert_eq!(ticket("").send(a).await.status, 401);

    // POST /login: under concurrency, exactly 5 failures reach the password
    // check across both apps; successes are refunded (in Redis too).
    let login = |body| probe("POST", "/login").from("192.0.2.40:1").body(body);
    for app in [a, b, a, b] {
        assert_eq!(login(LOGIN_OK).send(app).await.status, 200);
    }
    let codes = concurrently(&apps, 60, || login(LOGIN_BAD)).await;
    assert_eq!(count(&codes, 401), 5, "{codes:?}");
    assert_eq!(count(&codes, 429), 55, "{codes:?}");
    for app in [a, b] {
        let r = login(LOGIN_OK).send(app).await;
        r.assert_429();
    }
    assert_eq!(
        login(LOGIN_OK).from("192.0.2.41:1").send(b).await.status,
        200
    );

    // GET /api/items without a key: 10 per client IP; with a key, the
    // IP limit does not apply.
    let anon = || probe("GET", "/api/items").from("192.0.2.60:1");
    let codes = concurrently(&apps, 30, anon).await;
    assert_eq!(count(&codes, 200), 10, "{codes:?}");
    assert_eq!(count(&codes, 429), 20, "{codes:?}");
    for app in [a, b] {
        anon().send(app).await.assert_429();
        let r = anon().header("x-api-key", "key-1").send(app).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let r = anon().header("x-api-key", "key-1").send(a).await;
    assert!(r.header("ratelimit-policy").unwrap().contains("q=500"));

    // GET /health: never limited, never touches Redis.
    for app in [a, b] {
        assert_eq!(probe("GET", "/health").send(app).await.status, 200);
    }

    // No API key or bearer token names a Redis key: they are keyed hashes
    // (`axum-example:api-key:{#<32 hex>}:live`).
    let names = redis_key_names(&server).await;
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("axum-example:api-key:{#")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("axum-example:tickets:{#")),
        "{names:?}"
    );
    for name in &names {
        for secret in ["key-1", "alice", "bob"] {
            assert!(!name.contains(secret), "{name} names {secret}");
        }
    }
}

/// Every key name on `server` (`SCAN` to the end).
async fn redis_key_names(server: &RedisServer) -> Vec<String> {
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let (mut cursor, mut names) = (0u64, Vec::new());
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .query_async(&mut c)
            .await
            .unwrap();
        names.extend(batch);
        if next == 0 {
            return names;
        }
        cursor = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_when_redis_dies_then_sharing_resumes() {
    let mut server = server!();
    // The shipped default: 50 ms per call, then the in-memory fallback.
    let apps = two_apps(&server, None);
    let [a, b] = &apps;
    let account = |peer| probe("POST", "/accounts").from(peer);
    // The limit is shared once the connections are up, and each app
    // counts both.
    let mut round = 0;
    until_accounts_shared(&apps, &mut round).await;
    until_counted(&apps).await;

    // Load on every route from 8 tasks; Redis is killed halfway.
    let probes: [fn() -> Probe; 6] = [
        || probe("POST", "/accounts").from("192.0.2.2:1"),
        || probe("POST", "/tickets").header("authorization", "Bearer dave"),
        || probe("POST", "/login").from("192.0.2.3:1").body(LOGIN_BAD),
        || probe("POST", "/login").from("192.0.2.3:1").body(LOGIN_OK),
        || probe("GET", "/api/items").from("192.0.2.4:1"),
        || probe("GET", "/api/items").header("x-api-key", "key-9"),
    ];
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let apps = apps.clone();
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for i in 0..60 {
                    let p = probes[(t + i) % probes.len()]();
                    codes.push(p.send(&apps[i % 2]).await.status);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                codes
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(60)).await;
    server.kill();
    for t in tasks {
        let codes = t.await.unwrap();
        assert!(codes.iter().all(|&c| c < 500), "a 5xx escaped: {codes:?}");
    }

    // Redis down: each app limits on its own, in memory, to its share
    // of the limit (1 of 2: they counted each other, see
    // `until_counted`).
    for app in [a, b] {
        assert_eq!(account("198.51.100.1:1").send(app).await.status, 201);
        account("198.51.100.1:1").send(app).await.assert_429();
    }

    // Redis back (empty): within seconds the apps share the limits again.
    server.restart();
    until_accounts_shared(&apps, &mut round).await;
}
