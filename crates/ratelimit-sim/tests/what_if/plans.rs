//! A limit scoped to a plan sees only its plan's requests in the report:
//! a refused request of another plan is not counted as seen by it.

use ratelimit_sim::whatif::engine::{Engine, EngineOptions};
use ratelimit_sim::whatif::LogLine;
use tower_ratelimit::policy::{PolicyOptions, PolicyTable};

/// Pro: the addresses of `PRO_ADDRS`' list, 1 a minute; everyone else
/// ("none"): 1 a minute.
const TABLE: &str = r#"
[[plan]]
name = "pro"
key = "peer-ip"
keys-env = "RATELIMIT_SIM_TEST_PRO_ADDRS"

[[limit]]
name = "pro-requests"
plan = "pro"
algorithm = "fixed-window 1/1m"
key = "peer-ip"
routes = ["GET /api"]

[[limit]]
name = "anonymous"
plan = "none"
algorithm = "fixed-window 1/1m"
key = "peer-ip"
routes = ["GET /api"]
"#;

#[tokio::test]
async fn a_plan_scoped_limit_sees_only_its_plans_requests() {
    std::env::set_var("RATELIMIT_SIM_TEST_PRO_ADDRS", "192.0.2.1");
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let options = EngineOptions {
        policy: PolicyOptions::default(),
        proxy_header: http::HeaderName::from_static("x-forwarded-for"),
        max_keys: 1000,
        redact: false,
    };
    let mut engine = Engine::new(&table, options).unwrap();
    let line = |t: u64, ip: &str| {
        LogLine::new(
            t * 1_000_000_000,
            ip.parse().unwrap(),
            ("GET", "/api"),
            200,
            None,
        )
    };
    let (pro, anonymous) = (0b01, 0b10);
    for (ip, bit, name) in [
        ("192.0.2.1", pro, "pro-requests"),
        ("192.0.2.9", anonymous, "anonymous"),
    ] {
        let admitted = engine.decide(&line(1, ip)).await.unwrap();
        assert_eq!(admitted.seen, bit, "{ip} admitted");
        let refused = engine.decide(&line(2, ip)).await.unwrap();
        assert_eq!(
            refused.limited.as_ref().map(|l| l.limit),
            Some(bit.trailing_zeros() as usize)
        );
        assert_eq!(
            refused.seen, bit,
            "{ip} refused by {name}: seen by it alone"
        );
    }
}
