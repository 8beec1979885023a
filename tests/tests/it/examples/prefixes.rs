//! The shipped policy over address prefixes: however a client rotates
//! inside its IPv6 /48 or IPv4 /24 (through a trusted proxy's
//! `X-Forwarded-For`), the network gets at most 100 password checks per
//! hour and 20 accounts per day.

use super::*;

/// The address of the `i`th /64 of `2001:db8:7::/48`, a different host in
/// each.
fn in_the_48(i: u32) -> String {
    format!("2001:db8:7:{:x}::{:x}", i % 65_536, i + 1)
}

/// The `i`th address of `198.51.100.0/24`, every other one written as an
/// IPv4-mapped IPv6 address (the same client).
fn in_the_24(i: u32) -> String {
    match i % 2 {
        0 => format!("198.51.100.{}", i % 256),
        _ => format!("::ffff:198.51.100.{}", i % 256),
    }
}

/// Sends `n` requests of `send` with the client `addr(i)`, a forged
/// leftmost entry in each, and counts the statuses `want`.
async fn rotate(
    app: &Router,
    send: fn() -> Probe,
    addr: fn(u32) -> String,
    n: u32,
    want: u16,
) -> u32 {
    let mut got = 0;
    for i in 0..n {
        let xff = format!("6.6.6.{}, {}", i % 250, addr(i));
        let r = send()
            .from("10.1.2.3:5555")
            .header("x-forwarded-for", xff)
            .send(app)
            .await;
        match r.status {
            s if s == want => got += 1,
            429 => r.assert_429(),
            s => panic!("{s}: {r:?}"),
        }
    }
    got
}

fn failed_login() -> Probe {
    probe("POST", "/login").body(LOGIN_BAD)
}

fn new_account() -> Probe {
    probe("POST", "/accounts")
}

#[tokio::test]
async fn a_network_gets_100_password_checks_per_hour_however_it_rotates() {
    let (c, clock) = config("10.0.0.0/8");
    let app = app(&c);
    assert_eq!(rotate(&app, failed_login, in_the_48, 3000, 401).await, 100);
    assert_eq!(rotate(&app, failed_login, in_the_24, 768, 401).await, 100);
    // The refusal names the network's limit.
    let r = failed_login()
        .from("10.1.2.3:5555")
        .header("x-forwarded-for", "198.51.100.254")
        .send(&app)
        .await;
    r.assert_429();
    let fields: Vec<_> = r.headers.get_all("ratelimit").iter().collect();
    assert_eq!(
        fields,
        [
            "\"login-failures-network\";r=0;t=3600",
            "\"login-failures\";r=5;t=0"
        ],
        "{r:?}"
    );
    // A single /64 or address still gets only its own 5.
    let (c2, _) = config("10.0.0.0/8");
    let fresh = super::app(&c2);
    assert_eq!(
        rotate(
            &fresh,
            failed_login,
            |i| format!("2001:db8:9::{i:x}"),
            50,
            401
        )
        .await,
        5
    );
    // Other networks are untouched; an hour on, the /48 has 100 again.
    assert_eq!(
        rotate(
            &app,
            failed_login,
            |i| format!("2001:db8:8:{i:x}::1"),
            3,
            401
        )
        .await,
        3
    );
    clock.advance(Duration::from_secs(3600));
    assert_eq!(rotate(&app, failed_login, in_the_48, 3000, 401).await, 100);
}

#[tokio::test]
async fn a_network_gets_20_accounts_per_day_however_it_rotates() {
    let (c, clock) = config("10.0.0.0/8");
    let app = app(&c);
    assert_eq!(rotate(&app, new_account, in_the_48, 1000, 201).await, 20);
    assert_eq!(rotate(&app, new_account, in_the_24, 1000, 201).await, 20);
    clock.advance(Duration::from_secs(86_400));
    assert_eq!(rotate(&app, new_account, in_the_48, 1000, 201).await, 20);
}

#[tokio::test]
async fn an_account_the_network_refuses_is_given_back_to_the_client() {
    let (c, clock) = config("10.0.0.0/8");
    let app = app(&c);
    assert_eq!(rotate(&app, new_account, in_the_48, 20, 201).await, 20);
    // Half a day on, one client of the full /48 is refused three times.
    clock.advance(Duration::from_secs(43_200));
    let client = |_| "2001:db8:7:ffff::1".to_owned();
    assert_eq!(rotate(&app, new_account, client, 3, 201).await, 0);
    // When the network's accounts expire, that client still has its 2:
    // the refusals did not use them.
    clock.advance(Duration::from_secs(43_201));
    assert_eq!(rotate(&app, new_account, client, 3, 201).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_rotation_inside_a_48_reaches_the_check_100_times() {
    let (c, _) = config("10.0.0.0/8");
    let app = app(&c);
    let mut tasks = Vec::new();
    for i in 0..400u32 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            failed_login()
                .from("10.1.2.3:5555")
                .header("x-forwarded-for", in_the_48(i))
                .send(&app)
                .await
                .status
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|&&c| c == 401).count(), 100);
    assert_eq!(codes.iter().filter(|&&c| c == 429).count(), 300);
}

/// The same limits in Redis, shared by two apps: rotating across both
/// gains nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_redis_a_network_is_held_across_two_apps() {
    let Some(server) = integration_tests::redis_server::RedisServer::start() else {
        return;
    };
    // A timeout no loaded debug build reaches: every check is Redis's.
    let app = || {
        let (setup, _) = config("10.0.0.0/8");
        app_on_redis(&setup, &server.url(), Some(Duration::from_secs(5)))
    };
    let apps = [app(), app()];
    let mut tasks = Vec::new();
    for i in 0..300u32 {
        let app = apps[i as usize % 2].clone();
        tasks.push(tokio::spawn(async move {
            let via = |p: Probe| {
                p.from("10.1.2.3:5555")
                    .header("x-forwarded-for", in_the_48(i))
            };
            let login = via(failed_login()).send(&app).await.status;
            let account = via(new_account()).send(&app).await.status;
            (login, account)
        }));
    }
    let (mut logins, mut accounts) = (0, 0);
    for t in tasks {
        let (login, account) = t.await.unwrap();
        assert!(matches!(login, 401 | 429), "{login}");
        assert!(matches!(account, 201 | 429), "{account}");
        logins += u32::from(login == 401);
        accounts += u32::from(account == 201);
    }
    assert_eq!((logins, accounts), (100, 20));
}
