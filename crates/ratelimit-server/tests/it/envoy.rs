//! `examples/envoy`: its policy file loaded by ratelimitd's loader, and the
//! calls its `envoy.yaml` makes Envoy send, replayed through tonic.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimit_core::SystemClock;
use ratelimit_server::Config;
use std::sync::Arc;

fn example(file: &str) -> String {
    std::fs::read_to_string(example_path(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn example_path(file: &str) -> String {
    format!("{}/../../examples/envoy/{file}", env!("CARGO_MANIFEST_DIR"))
}

/// The descriptors Envoy sends for `/login` from `ip`: `per-ip`'s, then `login`'s.
fn login(
    ip: &str,
) -> Vec<envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor> {
    vec![
        descriptor(&[("remote_address", ip)], None),
        descriptor(&[("generic_key", "login"), ("remote_address", ip)], None),
    ]
}

#[test]
fn envoy_example_files_agree() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/envoy/ratelimitd.toml"
    );
    let config = Config::load(path.as_ref()).expect("the policy loads");
    let yaml = example("envoy.yaml");
    for limit in &config.limits {
        assert!(
            yaml.contains(&format!("domain: {}", limit.domain)),
            "{}",
            limit.name
        );
    }
    for needle in [
        "remote_address: {}",
        "generic_key: { descriptor_value: login }",
        "descriptor_key: api_key",
        "envoy_grpc: { cluster_name: ratelimitd }",
        &format!("port_value: {}", config.server.grpc.port()),
    ] {
        assert!(yaml.contains(needle), "envoy.yaml lacks {needle:?}");
    }
}

#[tokio::test]
async fn envoy_example_descriptors_replayed_against_its_policy() {
    // Read from its place: its plans' keys files are beside it.
    let path = example_path("ratelimitd.toml");
    let config = Config::parse(&example("ratelimitd.toml"), &path, |_| None).unwrap();
    let h = Harness::start_config(config, Arc::new(SystemClock::new())).await;
    // /login: 5 a minute per address; the 6th is refused by `login`.
    for i in 0..6 {
        let r = h.rls(request("edge", login("10.4.0.1"), 0)).await;
        let want = if i < 5 { Code::Ok } else { Code::OverLimit };
        assert_eq!(r.overall_code, want as i32, "call {i}: {r:?}");
        let names: Vec<&str> = r
            .statuses
            .iter()
            .map(|s| s.current_limit.as_ref().map_or("", |l| l.name.as_str()))
            .collect();
        assert_eq!(names, ["per-ip", "login"], "call {i}");
        if i == 5 {
            assert_eq!(r.statuses[1].code, Code::OverLimit as i32);
            assert_eq!(r.statuses[0].code, Code::Ok as i32);
            let headers: Vec<&str> = r
                .response_headers_to_add
                .iter()
                .map(|h| h.key.as_str())
                .collect();
            assert!(headers.contains(&"retry-after"), "{headers:?}");
        }
    }
    // Another address logs in; other routes from the refused address pass.
    let r = h.rls(request("edge", login("10.4.0.2"), 0)).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    let other = vec![
        descriptor(&[("remote_address", "10.4.0.1")], None),
        descriptor(&[("api_key", "k-1")], None),
    ];
    let r = h.rls(request("edge", other.clone(), 0)).await;
    assert_eq!(r.overall_code, Code::Ok as i32, "{r:?}");
    // 20 - 6 taken (the refused call took nothing), or more as GCRA refills.
    assert!(r.statuses[0].limit_remaining >= 14, "{r:?}");
    assert_eq!(
        r.statuses[1].current_limit.as_ref().unwrap().name,
        "per-key"
    );
    // A pro key's and a free key's descriptors: their plans' limits.
    for (key, limit) in [("pro-key-1", "pro-key"), ("free-key-1", "free-key")] {
        let keyed = vec![descriptor(&[("api_key", key)], None)];
        let r = h.rls(request("edge", keyed, 0)).await;
        let name = r.statuses[0].current_limit.as_ref().map(|l| l.name.clone());
        assert_eq!(name.as_deref(), Some(limit), "{r:?}");
    }
    // Without the x-api-key header Envoy sends only the address's descriptor.
    let r = h.rls(request("edge", other[..1].to_vec(), 0)).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    h.running.stop().await;
}
