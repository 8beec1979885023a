//! A calendar limit (`fixed-window 2/month`) through `ShouldRateLimit`, on
//! a `ManualClock`: reported as 2 per `MONTH`, with `duration_until_reset`
//! the exact time to the next UTC month, and fresh from March 1st.

use crate::harness::{descriptor, request, Harness};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{rate_limit::Unit, Code};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use ratelimit_core::ManualClock;
use std::sync::Arc;
use std::time::Duration;

const LIMITS: &str = r#"
[[limit]]
name = "monthly"
domain = "edge"
algorithm = "fixed-window 2/month"
descriptors = [{ key = "user" }]
"#;

const SEC: u64 = 1_000_000_000;
/// 2024-03-01 00:00:00 UTC (2024 is a leap year).
const MARCH_1: u64 = 1_709_251_200 * SEC;

async fn user(h: &Harness) -> RateLimitResponse {
    h.rls(request(
        "edge",
        vec![descriptor(&[("user", "ann")], None)],
        0,
    ))
    .await
}

/// The code, the unit and `duration_until_reset` of the one status.
fn status(r: &RateLimitResponse) -> (i32, i32, u32, Duration) {
    let s = &r.statuses[0];
    let limit = s.current_limit.as_ref().expect("a limit");
    let reset = s.duration_until_reset.as_ref().expect("a reset");
    let reset = Duration::new(reset.seconds as u64, reset.nanos as u32);
    (s.code, limit.unit, limit.requests_per_unit, reset)
}

#[tokio::test]
async fn a_monthly_limit_is_reported_per_month_and_resets_on_the_first() {
    let clock = Arc::new(ManualClock::new());
    // 2024-02-29 23:00 UTC: an hour before March.
    clock.set_nanos(MARCH_1 - 3_600 * SEC);
    let h = Harness::start_with_clock(LIMITS, clock.clone()).await;
    let (ok, over, month) = (Code::Ok as i32, Code::OverLimit as i32, Unit::Month as i32);
    let hour = Duration::from_secs(3_600);
    assert_eq!(status(&user(&h).await), (ok, month, 2, hour));
    assert_eq!(status(&user(&h).await), (ok, month, 2, hour));
    assert_eq!(status(&user(&h).await), (over, month, 2, hour));
    clock.set_nanos(MARCH_1 - 1);
    let last = status(&user(&h).await);
    assert_eq!((last.0, last.3), (over, Duration::from_nanos(1)));
    clock.set_nanos(MARCH_1);
    // March has 31 days.
    let march = Duration::from_secs(31 * 86_400);
    assert_eq!(status(&user(&h).await), (ok, month, 2, march));
}
