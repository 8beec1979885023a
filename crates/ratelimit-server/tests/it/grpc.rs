//! `ShouldRateLimit` through a tonic client built from envoy-types' client module.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{rate_limit::Unit, Code};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// Per IP 10 a minute, per user 2 a minute, a shadow limit of 2 a minute on
/// `shadow`, `office` unlimited. Windows start at a key's first request,
/// so no test straddles a boundary.
pub const LIMITS: &str = r#"
[server]
headers = true

[[limit]]
name = "per-ip"
domain = "edge"
algorithm = "fixed-window 10/1m anchor first-request"
descriptors = [{ key = "remote_address" }]

[[limit]]
name = "per-user"
domain = "edge"
algorithm = "fixed-window 2/1m anchor first-request"
descriptors = [{ key = "user" }]

[[limit]]
name = "dry-run"
domain = "edge"
algorithm = "fixed-window 2/1m anchor first-request"
descriptors = [{ key = "shadow" }]
shadow = true

[[limit]]
name = "office"
domain = "edge"
unlimited = true
descriptors = [{ key = "remote_address", value = "10.9.9.9" }]
"#;

async fn ip(h: &Harness, addr: &str, hits: Option<u64>, addend: u32) -> RateLimitResponse {
    h.rls(request(
        "edge",
        vec![descriptor(&[("remote_address", addr)], hits)],
        addend,
    ))
    .await
}

#[tokio::test]
async fn a_limit_of_10_a_minute_admits_exactly_10_of_15() {
    let h = Harness::start(LIMITS).await;
    let mut admitted = 0;
    for i in 0..15 {
        let r = ip(&h, "10.0.0.1", None, 0).await;
        let status = &r.statuses[0];
        let limit = status.current_limit.as_ref().expect("a limit");
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit),
            ("per-ip", 10)
        );
        assert_eq!(limit.unit, Unit::Minute as i32);
        if r.overall_code == OK {
            admitted += 1;
            assert_eq!(status.limit_remaining, 9 - i);
        } else {
            assert_eq!((r.overall_code, status.code), (OVER, OVER));
            let reset = status.duration_until_reset.expect("a reset");
            assert!(reset.seconds > 0 && reset.seconds <= 60, "{reset:?}");
        }
    }
    assert_eq!(admitted, 10);
    // Another client is untouched.
    assert_eq!(ip(&h, "10.0.0.2", None, 0).await.overall_code, OK);
    h.running.stop().await;
}

#[tokio::test]
async fn a_descriptor_over_its_limit_takes_nothing_from_the_others() {
    let h = Harness::start(LIMITS).await;
    let both = || {
        request(
            "edge",
            vec![
                descriptor(&[("remote_address", "10.0.0.3")], None),
                descriptor(&[("user", "ann")], None),
            ],
            0,
        )
    };
    // Two admitted: each takes one from both limits.
    for _ in 0..2 {
        assert_eq!(h.rls(both()).await.overall_code, OK);
    }
    // The user is out: the request is over, and the IP keeps its 8.
    for _ in 0..5 {
        let r = h.rls(both()).await;
        assert_eq!(r.overall_code, OVER);
        assert_eq!((r.statuses[0].code, r.statuses[1].code), (OK, OVER));
        assert_eq!(r.statuses[0].limit_remaining, 8);
    }
    assert_eq!(
        ip(&h, "10.0.0.3", Some(0), 0).await.statuses[0].limit_remaining,
        8
    );
    h.running.stop().await;
}

#[tokio::test]
async fn a_descriptor_hits_addend_of_0_peeks() {
    let h = Harness::start(LIMITS).await;
    for _ in 0..3 {
        let r = ip(&h, "10.0.0.4", Some(0), 0).await;
        assert_eq!(r.overall_code, OK);
        assert_eq!(r.statuses[0].limit_remaining, 10);
    }
    assert_eq!(
        ip(&h, "10.0.0.4", Some(4), 0).await.statuses[0].limit_remaining,
        6
    );
    let peek = ip(&h, "10.0.0.4", Some(0), 0).await;
    assert_eq!(
        (peek.overall_code, peek.statuses[0].limit_remaining),
        (OK, 6)
    );
    h.running.stop().await;
}

#[tokio::test]
async fn a_request_hits_addend_of_0_counts_1_and_others_count_as_given() {
    let h = Harness::start(LIMITS).await;
    assert_eq!(
        ip(&h, "10.0.0.5", None, 0).await.statuses[0].limit_remaining,
        9
    );
    assert_eq!(
        ip(&h, "10.0.0.5", None, 3).await.statuses[0].limit_remaining,
        6
    );
    // The descriptor's own addend wins over the request's.
    assert_eq!(
        ip(&h, "10.0.0.5", Some(1), 3).await.statuses[0].limit_remaining,
        5
    );
    // More than what is left: over, and nothing taken.
    assert_eq!(ip(&h, "10.0.0.5", None, 6).await.overall_code, OVER);
    assert_eq!(
        ip(&h, "10.0.0.5", Some(0), 0).await.statuses[0].limit_remaining,
        5
    );
    // Costs that can never fit: over, no retry time, nothing taken.
    for (hits, addend) in [(None, u32::MAX), (Some(u64::MAX), 0)] {
        let r = ip(&h, "10.0.0.5", hits, addend).await;
        assert_eq!(r.overall_code, OVER);
        assert!(!r
            .response_headers_to_add
            .iter()
            .any(|h| h.key == "retry-after"));
    }
    let left = ip(&h, "10.0.0.5", Some(0), 0).await.statuses[0].limit_remaining;
    assert_eq!(left, 5);
    h.running.stop().await;
}

#[tokio::test]
async fn a_shadow_limit_never_answers_over_limit() {
    let h = Harness::start(LIMITS).await;
    for _ in 0..6 {
        let r = h
            .rls(request(
                "edge",
                vec![descriptor(&[("shadow", "x")], None)],
                0,
            ))
            .await;
        assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK));
    }
    h.running.stop().await;
}

#[tokio::test]
async fn unlimited_and_unmatched_descriptors_are_ok() {
    let h = Harness::start(LIMITS).await;
    for _ in 0..20 {
        let r = ip(&h, "10.9.9.9", None, 0).await;
        assert_eq!(r.overall_code, OK);
        assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
        assert!(r.statuses[0].current_limit.is_none());
    }
    let r = h
        .rls(request("edge", vec![descriptor(&[("path", "/")], None)], 0))
        .await;
    assert_eq!(
        (r.overall_code, r.statuses[0].current_limit.clone()),
        (OK, None)
    );
    let r = h
        .rls(request(
            "other",
            vec![descriptor(&[("remote_address", "1.1.1.1")], None)],
            0,
        ))
        .await;
    assert_eq!(r.overall_code, OK);
    h.running.stop().await;
}

#[tokio::test]
async fn fifty_concurrent_calls_on_one_key_admit_exactly_the_limit() {
    let h = Harness::start(LIMITS).await;
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let mut client = h.grpc.clone();
        calls.spawn(async move {
            let r = client
                .should_rate_limit(request(
                    "edge",
                    vec![descriptor(&[("remote_address", "10.0.0.6")], None)],
                    0,
                ))
                .await
                .expect("ShouldRateLimit");
            r.into_inner().overall_code == OK
        });
    }
    let admitted = calls.join_all().await.into_iter().filter(|ok| *ok).count();
    assert_eq!(admitted, 10);
    h.running.stop().await;
}

#[tokio::test]
async fn response_headers_carry_the_ietf_fields_and_retry_after() {
    let h = Harness::start(LIMITS).await;
    let header = |r: &RateLimitResponse, name: &str| {
        r.response_headers_to_add
            .iter()
            .find(|h| h.key == name)
            .map(|h| h.value.clone())
    };
    let r = h
        .rls(request(
            "edge",
            vec![descriptor(&[("user", "bo")], None)],
            0,
        ))
        .await;
    assert_eq!(
        header(&r, "ratelimit-policy").as_deref(),
        Some("\"per-user\";q=2;w=60")
    );
    assert_eq!(
        header(&r, "ratelimit").as_deref(),
        Some("\"per-user\";r=1;t=60")
    );
    assert_eq!(header(&r, "retry-after"), None);
    h.rls(request(
        "edge",
        vec![descriptor(&[("user", "bo")], None)],
        0,
    ))
    .await;
    let r = h
        .rls(request(
            "edge",
            vec![descriptor(&[("user", "bo")], None)],
            0,
        ))
        .await;
    assert_eq!(r.overall_code, OVER);
    let retry: u64 = header(&r, "retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    h.running.stop().await;
}

#[tokio::test]
async fn what_the_server_cannot_honour_is_invalid_argument() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    let h = Harness::start(LIMITS).await;
    let mut client = h.grpc.clone();
    let err = client
        .should_rate_limit(request("", vec![descriptor(&[("user", "x")], None)], 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let mut d = descriptor(&[("user", "x")], None);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 5,
        unit: Unit::Second as i32,
    });
    let err = client
        .should_rate_limit(request("edge", vec![d], 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("descriptors[0]"),
        "{}",
        err.message()
    );
    // A key past the bound on memory per key.
    let long = "x".repeat(ratelimit_server::MAX_KEY_BYTES + 1);
    let err = client
        .should_rate_limit(request(
            "edge",
            vec![descriptor(&[("user", &long)], None)],
            0,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("longer than 512"),
        "{}",
        err.message()
    );
    h.running.stop().await;
}

#[tokio::test]
async fn a_cost_that_can_never_fit_reports_the_time_until_full_never_0() {
    let h = Harness::start(LIMITS).await;
    let field = |r: &RateLimitResponse, name: &str| {
        let found = r.response_headers_to_add.iter().find(|h| h.key == name);
        found.map(|h| h.value.clone())
    };
    // An empty key: the window (60 s), not 0.
    for (hits, addend) in [(None, u32::MAX), (Some(1 << 40), 0)] {
        let r = ip(&h, "10.0.0.50", hits, addend).await;
        assert_eq!((r.overall_code, r.statuses[0].code), (OVER, OVER));
        let until = r.statuses[0].duration_until_reset.expect("a reset");
        assert_eq!((until.seconds, until.nanos), (60, 0));
        assert_eq!(field(&r, "retry-after"), None);
        assert_eq!(
            field(&r, "ratelimit").as_deref(),
            Some("\"per-ip\";r=10;t=60")
        );
    }
    // A used key: until it is full again (its window's end).
    assert_eq!(ip(&h, "10.0.0.50", None, 0).await.overall_code, OK);
    let r = ip(&h, "10.0.0.50", None, u32::MAX).await;
    let until = r.statuses[0].duration_until_reset.expect("a reset");
    assert!(until.seconds > 0 && until.seconds <= 60, "{until:?}");
    h.running.stop().await;
}

#[tokio::test]
async fn descriptors_and_entries_per_call_are_capped() {
    use ratelimit_server::{MAX_DESCRIPTORS, MAX_ENTRIES};
    let h = Harness::start(LIMITS).await;
    let mut client = h.grpc.clone();
    let many = vec![descriptor(&[("user", "cap")], Some(0)); MAX_DESCRIPTORS + 1];
    let err = client
        .should_rate_limit(request("edge", many, 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("at most 64"), "{}", err.message());
    let keys: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("k{i}")).collect();
    let entries: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
    let err = client
        .should_rate_limit(request("edge", vec![descriptor(&entries, None)], 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("descriptors[0]: 17 entries"),
        "{}",
        err.message()
    );
    // Exactly the cap is served.
    let most = vec![descriptor(&[("user", "cap")], Some(0)); MAX_DESCRIPTORS];
    assert_eq!(h.rls(request("edge", most, 0)).await.statuses.len(), 64);
    h.running.stop().await;
}

#[tokio::test]
async fn the_fields_show_the_most_restrictive_descriptor_only() {
    let h = Harness::start(LIMITS).await;
    let field = |r: &RateLimitResponse, name: &str| {
        let found = r.response_headers_to_add.iter().find(|h| h.key == name);
        found.map(|h| h.value.clone())
    };
    let three = || {
        vec![
            descriptor(&[("remote_address", "10.0.0.60")], None),
            descriptor(&[("user", "most")], None),
            descriptor(&[("remote_address", "10.0.0.61")], None),
        ]
    };
    let r = h.rls(request("edge", three(), 0)).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(
        r.response_headers_to_add.len(),
        2,
        "{:?}",
        r.response_headers_to_add
    );
    assert_eq!(
        field(&r, "ratelimit-policy").as_deref(),
        Some("\"per-user\";q=2;w=60")
    );
    assert_eq!(
        field(&r, "ratelimit").as_deref(),
        Some("\"per-user\";r=1;t=60")
    );
    h.running.stop().await;
}

#[tokio::test]
async fn a_descriptor_value_that_is_not_utf8_is_invalid_argument_naming_its_key() {
    use tonic::codegen::http::uri::PathAndQuery;
    #[derive(Clone, PartialEq, prost::Message)]
    struct RawRequest {
        #[prost(string, tag = "1")]
        domain: String,
        #[prost(message, repeated, tag = "2")]
        descriptors: Vec<RawDescriptor>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct RawDescriptor {
        #[prost(message, repeated, tag = "1")]
        entries: Vec<RawEntry>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct RawEntry {
        #[prost(bytes = "vec", tag = "1")]
        key: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        value: Vec<u8>,
    }
    let h = Harness::start(LIMITS).await;
    let addr = format!("http://{}", h.running.grpc_addr);
    let channel = tonic::transport::Endpoint::from_shared(addr)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
    let entry = |key: &[u8], value: &[u8]| RawEntry {
        key: key.to_vec(),
        value: value.to_vec(),
    };
    let cases = [
        (
            entry(b"user", b"\xff\xfe"),
            "descriptors[0]: entry \"user\": the value is not UTF-8",
        ),
        (
            entry(b"\xc3", b"x"),
            "descriptors[0].entries[0]: the key is not UTF-8",
        ),
    ];
    for (bad, want) in cases {
        let raw = RawRequest {
            domain: "edge".into(),
            descriptors: vec![RawDescriptor { entries: vec![bad] }],
        };
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<RawRequest, RateLimitResponse>::default();
        let err = grpc
            .unary(
                tonic::Request::new(raw),
                PathAndQuery::from_static(path),
                codec,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
        assert_eq!(err.message(), want);
    }
    h.running.stop().await;
}
