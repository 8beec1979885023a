//! `[metrics]`: Prometheus text at `GET /metrics`, decisions counted per limit name, domain and code.

use crate::harness::Harness;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use std::sync::Arc;

const LIMITS: &str = r#"
[metrics]
address = "127.0.0.1:9090"

[[limit]]
name = "scraped"
domain = "metered"
algorithm = "fixed-window 2/1h"
descriptors = [{ key = "remote_address" }]

[[limit]]
name = "scraped-trial"
domain = "metered"
algorithm = "fixed-window 1/1h"
descriptors = [{ key = "user" }]
shadow = true
"#;

/// The value of the sample `line` (a name with its labels) in `body`.
fn sample(body: &str, line: &str) -> Option<f64> {
    let rest = body.lines().find_map(|l| l.strip_prefix(line))?;
    rest.trim().parse().ok()
}

#[tokio::test]
async fn decisions_are_counted_per_limit_domain_and_code() {
    let config = Config::parse(LIMITS, "metrics.toml", |_| None).unwrap();
    let h = Harness::start_config(config, Arc::new(SystemClock::new())).await;
    let ip = |ip: &str| format!(r#"{{"limit":"scraped","key":"{ip}"}}"#);
    for _ in 0..3 {
        h.http("POST", "/check", &[], &ip("203.0.113.77")).await;
    }
    let peek = r#"{"limit":"scraped","key":"203.0.113.78","cost":0}"#;
    assert_eq!(h.http("POST", "/check", &[], peek).await.status, 200);
    for _ in 0..2 {
        let user = crate::harness::descriptor(&[("user", "alice-secret-id")], None);
        let r = h
            .rls(crate::harness::request("metered", vec![user], 0))
            .await;
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    let a = h
        .http_at(h.running.metrics_addr, "GET", "/metrics", &[], "")
        .await;
    assert_eq!(a.status, 200);
    let counted = |limit: &str, code: &str| {
        let line = format!(
            "ratelimitd_decisions_total{{limit=\"{limit}\",domain=\"metered\",code=\"{code}\"}}"
        );
        sample(&a.body, &line).unwrap_or_else(|| panic!("no {line} in\n{}", a.body))
    };
    assert_eq!(counted("scraped", "admitted"), 2.0);
    assert_eq!(counted("scraped", "refused"), 1.0);
    assert_eq!(counted("scraped", "peek"), 1.0);
    assert_eq!(counted("scraped-trial", "admitted"), 1.0);
    assert_eq!(counted("scraped-trial", "shadow_refused"), 1.0);
    assert!(
        a.body.contains("ratelimitd_check_duration_seconds"),
        "{}",
        a.body
    );
    // Limit names only: never a key.
    for key in ["203.0.113.77", "alice-secret-id"] {
        assert!(!a.body.contains(key), "{key} in\n{}", a.body);
    }
    h.running.stop().await;
}

#[tokio::test]
async fn descriptors_that_match_no_limit_are_counted_without_labels() {
    let config = Config::parse(LIMITS, "metrics.toml", |_| None).unwrap();
    let h = Harness::start_config(config, Arc::new(SystemClock::new())).await;
    let unmatched = [
        ("nowhere-domain", "remote_address"),
        ("metered", "no-such-entry"),
    ];
    for (domain, key) in unmatched {
        let d = crate::harness::descriptor(&[(key, "unmatched-secret-value")], None);
        let r = h.rls(crate::harness::request(domain, vec![d], 0)).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    let body = r#"{"domain":"nowhere-domain","descriptors":[[{"key":"k","value":"v"}]]}"#;
    assert_eq!(h.http("POST", "/check", &[], body).await.status, 200);
    let a = h
        .http_at(h.running.metrics_addr, "GET", "/metrics", &[], "")
        .await;
    // Other tests of this process count theirs too: at least these 3.
    let n = sample(&a.body, "ratelimitd_unmatched_total ")
        .unwrap_or_else(|| panic!("no unlabelled counter in\n{}", a.body));
    assert!(n >= 3.0, "{n}");
    for sent in ["nowhere-domain", "no-such-entry", "unmatched-secret-value"] {
        assert!(!a.body.contains(sent), "{sent} in\n{}", a.body);
    }
    h.running.stop().await;
}

#[tokio::test]
async fn metrics_are_off_by_default() {
    let config = Config::parse(
        &LIMITS.replace("[metrics]\naddress = \"127.0.0.1:9090\"", ""),
        "m.toml",
        |_| None,
    )
    .unwrap();
    assert!(config.deployment.metrics.is_none());
    let h = Harness::start_config(config, Arc::new(SystemClock::new())).await;
    assert!(h.running.metrics_addr.is_none());
    h.running.stop().await;
}

#[test]
fn metrics_addr_from_the_environment_wins() {
    let env = |v: &str| (v == "METRICS_ADDR").then(|| "127.0.0.1:9999".to_owned());
    let config = Config::parse(LIMITS, "m.toml", env).unwrap();
    assert_eq!(
        config.deployment.metrics,
        Some("127.0.0.1:9999".parse().unwrap())
    );
    let bad = Config::parse("[metrics]\naddress = \"here\"", "m.toml", |_| None).unwrap_err();
    assert!(
        bad.to_string()
            .starts_with("m.toml:2: [metrics] address: \"here\""),
        "{bad}"
    );
}
