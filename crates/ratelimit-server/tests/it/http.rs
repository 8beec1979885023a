//! The HTTP API: `POST /check` in both forms, `GET /check` for forward auth, `/ready`, `/health`, and config errors.

use crate::harness::Harness;
use ratelimit_server::Config;

const LIMITS: &str = r#"
[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 3/1m anchor first-request"
descriptors = [{ key = "remote_address" }]

[[limit]]
name = "login"
domain = "edge"
algorithm = "fixed-window 2/1m anchor first-request"
descriptors = [{ key = "path", value = "/login" }, { key = "remote_address" }]
key-header = "x-client"

[[limit]]
name = "pair"
domain = "edge"
algorithm = "gcra 5/1s"
descriptors = [{ key = "tenant" }, { key = "user" }]
"#;

fn by_descriptor(ip: &str) -> String {
    format!(r#"{{"domain":"edge","descriptors":[[{{"key":"remote_address","value":"{ip}"}}]]}}"#)
}

#[tokio::test]
async fn post_check_by_descriptors_answers_200_then_429_with_fields() {
    let h = Harness::start(LIMITS).await;
    for left in [2, 1, 0] {
        let a = h
            .http("POST", "/check", &[], &by_descriptor("10.1.0.1"))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(a.body.contains("\"allowed\":true"), "{}", a.body);
        assert!(
            a.body.contains(&format!("\"remaining\":{left}")),
            "{}",
            a.body
        );
        assert_eq!(a.headers["ratelimit-policy"], "\"per-ip\";q=3;w=60");
    }
    let a = h
        .http("POST", "/check", &[], &by_descriptor("10.1.0.1"))
        .await;
    assert_eq!(a.status, 429, "{}", a.body);
    assert!(
        a.body.contains("\"overall_code\":\"OVER_LIMIT\""),
        "{}",
        a.body
    );
    let retry: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(a.headers["ratelimit"]
        .to_str()
        .unwrap()
        .starts_with("\"per-ip\";r=0;t="));
    h.running.stop().await;
}

#[tokio::test]
async fn post_check_by_limit_and_key_shares_the_descriptors_counter() {
    let h = Harness::start(LIMITS).await;
    let by_key = |cost: u64| format!(r#"{{"limit":"per-ip","key":"10.1.0.2","cost":{cost}}}"#);
    assert_eq!(h.http("POST", "/check", &[], &by_key(2)).await.status, 200);
    // A cost of 0 peeks.
    let peek = h.http("POST", "/check", &[], &by_key(0)).await;
    assert!(peek.body.contains("\"remaining\":1"), "{}", peek.body);
    assert_eq!(
        h.http("POST", "/check", &[], &by_descriptor("10.1.0.2"))
            .await
            .status,
        200
    );
    assert_eq!(h.http("POST", "/check", &[], &by_key(1)).await.status, 429);
    h.running.stop().await;
}

#[tokio::test]
async fn post_check_of_a_cost_that_can_never_fit_says_so_and_invites_no_retry() {
    let h = Harness::start(LIMITS).await;
    let by_key = format!(
        r#"{{"limit":"per-ip","key":"10.1.0.9","cost":{}}}"#,
        u64::MAX
    );
    let by_descriptors = r#"{"domain":"edge","hits_addend":1099511627776,
        "descriptors":[[{"key":"remote_address","value":"10.1.0.9"}]]}"#;
    for body in [by_key.as_str(), by_descriptors] {
        let a = h.http("POST", "/check", &[], body).await;
        assert_eq!(a.status, 429, "{}", a.body);
        assert!(a.body.contains("\"never_admissible\":true"), "{}", a.body);
        assert!(a.body.contains("\"retry_after_secs\":null"), "{}", a.body);
        assert!(!a.headers.contains_key("retry-after"));
        assert_eq!(a.headers["ratelimit"], "\"per-ip\";r=3;t=60");
    }
    let a = h
        .http("POST", "/check", &[], &by_descriptor("10.1.0.9"))
        .await;
    assert!(a.body.contains("\"never_admissible\":false"), "{}", a.body);
    h.running.stop().await;
}

#[tokio::test]
async fn post_check_caps_the_descriptors_of_a_call() {
    let h = Harness::start(LIMITS).await;
    let one = r#"[{"key":"remote_address","value":"10.1.0.30"}]"#;
    let body = |n: usize| {
        let all = vec![one; n].join(",");
        format!(r#"{{"domain":"edge","hits_addend":0,"descriptors":[{all}]}}"#)
    };
    let a = h.http("POST", "/check", &[], &body(65)).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("65 descriptors: at most 64"), "{}", a.body);
    let a = h.http("POST", "/check", &[], &body(3)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    // One descriptor's fields, however many were checked.
    assert_eq!(a.headers["ratelimit"], "\"per-ip\";r=0;t=60");
    h.running.stop().await;
}

#[tokio::test]
async fn bad_bodies_are_400_naming_the_fault() {
    let h = Harness::start(LIMITS).await;
    for body in [
        "{",
        r#"{"limit":"per-ip"}"#,
        r#"{"limit":"per-ip","key":"k","domain":"edge"}"#,
        r#"{"domain":"edge","descriptors":[[]]}"#,
        r#"{"limit":"per-ip","key":"k","colour":"red"}"#,
        r#"{"limit":"pair","key":"k"}"#,
    ] {
        let a = h.http("POST", "/check", &[], body).await;
        assert_eq!(a.status, 400, "{body}: {}", a.body);
        assert!(a.body.contains("\"error\""), "{body}: {}", a.body);
    }
    let long = format!(r#"{{"limit":"per-ip","key":"{}"}}"#, "x".repeat(513));
    let a = h.http("POST", "/check", &[], &long).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("longer than 512"), "{}", a.body);
    let a = h
        .http("POST", "/check", &[], r#"{"limit":"nope","key":"k"}"#)
        .await;
    assert_eq!(a.status, 404, "{}", a.body);
    h.running.stop().await;
}

#[tokio::test]
async fn get_check_without_proxies_keys_on_the_peer_and_on_the_limits_header() {
    let h = Harness::start(LIMITS).await;
    // No proxy trusted: X-Real-IP names no one; the peer is the client.
    for (i, ip) in ["10.1.0.3", "10.1.0.4", "not an address"]
        .iter()
        .enumerate()
    {
        let a = h
            .http("GET", "/check?limit=per-ip", &[("x-real-ip", ip)], "")
            .await;
        assert_eq!(a.status, 204, "{ip}");
        let r = format!("r={};", 2 - i);
        assert!(
            a.headers["ratelimit"].to_str().unwrap().contains(&r),
            "{:?}",
            a.headers
        );
    }
    let a = h.http("GET", "/check?limit=per-ip", &[], "").await;
    assert_eq!(a.status, 429);
    assert!(a.headers.contains_key("retry-after"));
    let peek = r#"{"limit":"per-ip","key":"127.0.0.1","cost":0}"#;
    let a = h.http("POST", "/check", &[], peek).await;
    assert!(a.body.contains("\"remaining\":0"), "{}", a.body);
    // A limit's key-header is read as sent; without it, 400 naming it.
    let a = h.http("GET", "/check?limit=login", &[], "").await;
    assert_eq!(a.status, 400);
    assert!(a.body.contains("x-client"), "{}", a.body);
    // A limit with a fixed entry and one varying entry keys on its own header.
    let client = [("x-client", "c1")];
    assert_eq!(
        h.http("GET", "/check?limit=login", &client, "")
            .await
            .status,
        204
    );
    h.running.stop().await;
}

#[tokio::test]
async fn refuse_status_403_is_for_nginx_auth_request() {
    let h = Harness::start(&format!("[server]\nrefuse-status = 403\n{LIMITS}")).await;
    let ip: [(&str, &str); 0] = [];
    for _ in 0..3 {
        assert_eq!(
            h.http("GET", "/check?limit=per-ip", &ip, "").await.status,
            204
        );
    }
    assert_eq!(
        h.http("GET", "/check?limit=per-ip", &ip, "").await.status,
        403
    );
    h.running.stop().await;
}

#[tokio::test]
async fn ready_and_health_answer_and_stop_closes_the_ports() {
    let h = Harness::start(LIMITS).await;
    assert_eq!(h.http("GET", "/ready", &[], "").await.status, 200);
    assert_eq!(h.http("GET", "/health", &[], "").await.status, 200);
    let (grpc, http) = (h.running.grpc_addr, h.running.http_addr);
    h.running.stop().await;
    assert!(tokio::net::TcpStream::connect(http).await.is_err());
    assert!(tokio::net::TcpStream::connect(grpc).await.is_err());
}

#[test]
fn config_errors_name_the_file_the_line_the_limit_and_the_value() {
    let cases = [
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\nalgorithm = \"gcra 10/1q\"\ndescriptors = [{ key = \"k\" }]\n",
            "f.toml:1: limit \"a\": algorithm = \"gcra 10/1q\"",
        ),
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\ndescriptors = [{ key = \"k\" }]\n",
            "f.toml:1: limit \"a\": no algorithm",
        ),
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\nunlimited = true\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{ key = \"k\" }]\n",
            "and unlimited = true",
        ),
        (
            "[server]\nrefuse-status = 500\n",
            "f.toml: [server] refuse-status = 500",
        ),
        (
            "[server]\ngrpc = \"nowhere\"\n",
            "[server] grpc = \"nowhere\"",
        ),
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{ key = \"k\", value = \"\" }]\n",
            "value = \"\"",
        ),
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{ key = \"k\" }]\n\
             [[limit]]\nname = \"b\"\ndomain = \"d\"\nalgorithm = \"gcra 2/1s\"\ndescriptors = [{ key = \"k\" }]\n",
            "limit \"b\": same domain, descriptors and plan as limit \"a\"",
        ),
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{ key = \"k\" }]\nshadw = true\n",
            "shadw",
        ),
        (
            "[store]\nkind = \"memory\"\nmax-keys = 0\n",
            "f.toml:3: [store] max-keys: 0: expected 1 to",
        ),
        (
            "[[limit]]\nname = \"x/y?z\"\ndomain = \"d\"\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{ key = \"k\" }]\n",
            "f.toml:1: limit \"x/y?z\": name = \"x/y?z\": 1 to 64 letters, digits, - and _",
        ),
        (
            "[colour]\nred = true\n",
            "f.toml:1: unknown field `colour`, expected [server], [[limit]], [[plan]], [store], [proxies], [admin] or [metrics]",
        ),
        (
            "[[limit]]\nname = \"a\"\ndomain = \"d\"\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{ key = \"k\" }]\nkey-header = \"X-Real-IP\"\n",
            "key-header = \"X-Real-IP\" carries the client's address through proxies",
        ),
        (
            &format!(
                "[[limit]]\nname = \"a\"\ndomain = \"d\"\nalgorithm = \"gcra 1/1s\"\ndescriptors = [{}]\n",
                vec!["{ key = \"k\" }"; 17].join(", ")
            ),
            "descriptors has 17 entries: at most 16",
        ),
    ];
    for (text, want) in cases {
        let err = Config::parse(text, "f.toml", |_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err:?} lacks {want:?}");
    }
}

#[test]
fn the_example_configuration_loads() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ratelimitd.toml");
    let config = Config::load(path.as_ref()).expect("the example loads");
    assert!(!config.limits.is_empty());
}
