//! `[[plan]]`s in ratelimitd: free and pro keys get their plans' limits through a gRPC client built from the protocol's types; a key moved to pro through the admin API of one server gets pro's limits on a second on the same Redis; keys in no plan fall to `none` limits; bad plans are refused at load naming the file, the line and the plan.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use ratelimit_test_support::RedisServer;
use std::sync::Arc;

const TOKEN: &str = "test-admin-token-0123456789";

/// Pro keys from `PRO_KEYS`, free keys from `FREE_KEYS`, the admin token.
fn env(var: &str) -> Option<String> {
    match var {
        "PRO_KEYS" => Some("pro-1".to_owned()),
        "FREE_KEYS" => Some("free-1, free-2".to_owned()),
        "ADMIN_TOKEN" => Some(TOKEN.to_owned()),
        _ => None,
    }
}

/// Free: 2 a minute per key; pro: 5; keys in no plan: 1 per address.
/// `store` is the `[store]` section (and `[admin]`), if any; `shared`
/// makes pro's moves shared.
fn plans_file(store: &str, shared: bool) -> String {
    format!(
        r#"
{store}

[[plan]]
name = "pro"
key = "descriptor:api_key"
keys-env = "PRO_KEYS"
shared = {shared}

[[plan]]
name = "free"
key = "descriptor:api_key"
keys-env = "FREE_KEYS"

[[limit]]
name = "pro-requests"
domain = "api"
plan = "pro"
algorithm = "fixed-window 5/1m anchor first-request"
descriptors = [{{ key = "api_key" }}]

[[limit]]
name = "free-requests"
domain = "api"
plan = "free"
algorithm = "fixed-window 2/1m anchor first-request"
descriptors = [{{ key = "api_key" }}]

[[limit]]
name = "anonymous"
domain = "api"
plan = "none"
algorithm = "fixed-window 1/1m anchor first-request"
descriptors = [{{ key = "remote_address" }}]
"#
    )
}

/// How many of `n` calls with `api_key` (and an address) are admitted.
async fn admitted(server: &Harness, api_key: Option<&str>, ip: &str, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        let mut descriptors = vec![descriptor(&[("remote_address", ip)], None)];
        if let Some(key) = api_key {
            descriptors.push(descriptor(&[("api_key", key)], None));
        }
        let answer = server.rls(request("api", descriptors, 0)).await;
        if answer.overall_code == Code::Ok as i32 {
            admitted += 1;
        }
    }
    admitted
}

async fn start(toml: &str) -> Harness {
    let config = Config::parse(toml, "plans.toml", env).expect("config");
    Harness::start_config(config, Arc::new(SystemClock::new())).await
}

#[tokio::test]
async fn free_and_pro_keys_get_their_plans_limits_and_keys_in_no_plan_fall_to_none() {
    let server = start(&plans_file("", false)).await;
    assert_eq!(admitted(&server, Some("pro-1"), "10.0.0.1", 8).await, 5);
    assert_eq!(admitted(&server, Some("free-1"), "10.0.0.2", 8).await, 2);
    // A key no plan lists, and no key: the anonymous limit, per address.
    assert_eq!(admitted(&server, Some("stranger"), "10.0.0.3", 4).await, 1);
    assert_eq!(admitted(&server, None, "10.0.0.4", 4).await, 1);
    // A planned request's address passes the `none` limit untouched.
    assert_eq!(admitted(&server, Some("free-2"), "10.0.0.4", 2).await, 2);
    // An HTTP check naming a limit and a key takes the key's plan: a pro
    // key passes the free limit as if it matched nothing.
    let check = |key: &str| format!(r#"{{"limit":"free-requests","key":"{key}"}}"#);
    let pro = server.http("POST", "/check", &[], &check("pro-1")).await;
    assert_eq!(pro.status, 200, "{}", pro.body);
    assert!(pro.body.contains(r#""limit":null"#), "{}", pro.body);
    let free = server.http("POST", "/check", &[], &check("free-1")).await;
    assert_eq!(free.status, 429, "{}", free.body);
    server.running.stop().await;
}

/// An admin call with the token to `server`.
async fn admin(server: &Harness, method: &str, path: &str) -> (u16, String) {
    let auth = format!("Bearer {TOKEN}");
    let answer = server
        .http_at(
            server.running.admin_addr,
            method,
            path,
            &[("authorization", &auth)],
            "",
        )
        .await;
    (answer.status, answer.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_moved_to_pro_on_one_server_gets_pros_limits_on_a_second_on_the_same_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let store = format!(
        "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n\n[admin]\naddress = \"127.0.0.1:0\"\n",
        redis.url()
    );
    let toml = plans_file(&store, true);
    let (a, b) = (start(&toml).await, start(&toml).await);
    assert_eq!(admitted(&b, Some("free-2"), "10.1.0.1", 3).await, 2);
    let (status, body) = admin(&a, "PUT", "/plans/pro/keys/free-2").await;
    assert_eq!(status, 200, "{body}");
    // The second server learns the move through Redis.
    let mut moved = false;
    for _ in 0..200 {
        let members = b.state.plans().members();
        if members.iter().any(|p| p.name == "pro" && p.moved_in == 1) {
            moved = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(moved, "{:?}", b.state.plans().members());
    // Pro's limit, from its own count: 5 more.
    assert_eq!(admitted(&b, Some("free-2"), "10.1.0.1", 8).await, 5);
    let (status, body) = admin(&b, "GET", "/plans").await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""moved_in":1"#), "{body}");
    assert!(!body.contains("free-2"), "no key is shown: {body}");
    // Back to its list's plan, on both.
    let (status, body) = admin(&b, "DELETE", "/plans/pro/keys/free-2").await;
    assert_eq!(
        (status, body.contains(r#""now":"free""#)),
        (200, true),
        "{body}"
    );
    let (status, _) = admin(&a, "PUT", "/plans/gold/keys/free-2").await;
    assert_eq!(status, 404);
    a.running.stop().await;
    b.running.stop().await;
}

#[test]
fn bad_plans_are_refused_at_load_naming_the_file_the_line_and_the_plan() {
    let err = |text: &str| {
        Config::parse(text, "plans.toml", env)
            .unwrap_err()
            .to_string()
    };
    let plan = |body: &str| format!("\n[[plan]]\nname = \"pro\"\n{body}\n");
    let app = err(&plan("key = \"descriptor:api_key\"\nkeys-app = \"db\""));
    assert!(
        app.starts_with("plans.toml:2: plan \"pro\": keys-app"),
        "{app}"
    );
    let http_key = err(&plan("key = \"api-key\"\nkeys-env = \"PRO_KEYS\""));
    assert!(
        http_key.starts_with("plans.toml:2: plan \"pro\": key \"api-key\""),
        "{http_key}"
    );
    let unset = err(&plan("key = \"descriptor:api_key\"\nkeys-env = \"NOPE\""));
    assert!(
        unset.contains("plans.toml:2: plan \"pro\": keys-env NOPE is not set"),
        "{unset}"
    );
    let memory = err(&plan("key = \"descriptor:api_key\"\nshared = true"));
    assert!(
        memory.starts_with("plans.toml:2: plan \"pro\": shared = true needs the store in Redis"),
        "{memory}"
    );
    let twice = err(&format!(
        "{}{}",
        plan("key = \"descriptor:api_key\"\nkeys-env = \"PRO_KEYS\""),
        "[[plan]]\nname = \"free\"\nkey = \"descriptor:api_key\"\nkeys-env = \"PRO_KEYS\"\n"
    ));
    assert!(twice.contains("a key is in one plan"), "{twice}");
    assert!(
        !twice.contains("pro-1"),
        "a listed key is never shown: {twice}"
    );
    let unknown = err(
        "[[limit]]\nname = \"x\"\ndomain = \"api\"\nplan = \"gold\"\nalgorithm = \"gcra 1/1s\"\n\
         descriptors = [{ key = \"api_key\" }]\n",
    );
    assert!(
        unknown.starts_with("plans.toml:1: limit \"x\": unknown plan \"gold\""),
        "{unknown}"
    );
}

#[tokio::test]
async fn a_reload_reads_the_keys_file_again_all_or_nothing() {
    let dir = std::env::temp_dir().join(format!("ratelimitd-plans-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (config_path, keys) = (dir.join("plans.toml"), dir.join("pro-keys.txt"));
    std::fs::write(&keys, "# pro customers\npro-1\n").unwrap();
    let text =
        plans_file("", false).replace("keys-env = \"PRO_KEYS\"", "keys-file = \"pro-keys.txt\"");
    std::fs::write(&config_path, &text).unwrap();
    let load = || Config::parse(&text, &config_path.display().to_string(), env);
    let server = Harness::start_config(load().unwrap(), Arc::new(SystemClock::new())).await;
    assert_eq!(
        admitted(&server, Some("pro-2"), "10.2.0.1", 3).await,
        1,
        "no plan yet"
    );
    std::fs::write(&keys, "pro-1\npro-2\n").unwrap();
    server.reload(load().unwrap()).unwrap();
    assert_eq!(admitted(&server, Some("pro-2"), "10.2.0.2", 8).await, 5);
    // A key listed in two plans: refused whole, the running members stay.
    std::fs::write(&keys, "pro-1\nfree-1\n").unwrap();
    let err = load().map(|c| server.reload(c)).unwrap_err().to_string();
    assert!(err.contains("a key is in one plan"), "{err}");
    assert_eq!(server.state.plans().members()[0].listed, 2);
    // A plan changed otherwise needs a restart: refused, limits too.
    std::fs::write(&keys, "pro-1\n").unwrap();
    let changed = text
        .replace("name = \"free\"\nkey", "name = \"basic\"\nkey")
        .replace(
            "algorithm = \"fixed-window 5/1m",
            "algorithm = \"fixed-window 50/1m",
        );
    let changed = Config::parse(
        &changed.replace("plan = \"free\"", "plan = \"basic\""),
        &config_path.display().to_string(),
        env,
    );
    let err = server.reload(changed.unwrap()).unwrap_err().to_string();
    assert!(
        err.contains("plans.toml:10: plan \"basic\": changing its name needs a restart"),
        "{err}"
    );
    assert_eq!(server.state.plans().members()[0].listed, 2);
    assert_eq!(
        admitted(&server, Some("pro-2"), "10.2.0.2", 1).await,
        0,
        "pro's 5 stay"
    );
    server.running.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
