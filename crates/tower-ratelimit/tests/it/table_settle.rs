//! `estimate` and `cost-from` in a policy table: checked at load with errors naming the limit, reserved from a request header, settled from a response header, and a refusal by the settled limit given back to the limit outside it.

use crate::common::get_from;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use ratelimit_core::ManualClock;
use std::sync::Arc;
use tower::ServiceExt;
use tower_ratelimit::policy::{Estimate, PolicyHandle, PolicyOptions, PolicyTable};

const TABLE: &str = r#"
[[limit]]
name = "requests"
algorithm = "fixed-window 60/1m"
key = "peer-ip"

[[limit]]
name = "tokens"
algorithm = "fixed-window 1000/1d"
key = "peer-ip"
estimate = "header:x-max-tokens"
max-cost = 500
cost-from = "response-header:x-tokens-used"
"#;

fn entry(extra: &str) -> String {
    format!(
        "[[limit]]\nname = \"t\"\nalgorithm = \"fixed-window 100/1m\"\nkey = \"global\"\n{extra}\n"
    )
}

#[test]
fn bad_settings_are_refused_naming_the_limit() {
    let cases = [
        ("estimate = 5", "limit \"t\": estimate needs cost-from"),
        (
            "cost-from = \"response-header:\"",
            "limit \"t\": bad cost-from response-header:\"\"",
        ),
        (
            "cost-from = \"body\"",
            "limit \"t\": bad cost-from \"body\"",
        ),
        (
            "estimate = \"max_tokens\"\ncost-from = \"extension\"",
            "limit \"t\": bad estimate \"max_tokens\"",
        ),
        (
            "estimate = 101\ncost-from = \"extension\"",
            "limit \"t\": estimate = 101 is above the capacity 100",
        ),
        (
            "cost = 2\nestimate = 5\ncost-from = \"extension\"",
            "limit \"t\": cost and estimate both set",
        ),
        ("estimate = -1\ncost-from = \"extension\"", "limit \"t\": "),
        (
            "estimate = 0\ncost-from = \"reported\"",
            "limit \"t\": estimate = 0 makes every call a peek",
        ),
        (
            "estimate = \"header:x-max-tokens\"\ncost-from = \"extension\"",
            "limit \"t\": estimate = \"header:x-max-tokens\" needs max-cost = N",
        ),
        (
            "estimate = \"header:x-max-tokens\"\nmax-cost = 0\ncost-from = \"extension\"",
            "limit \"t\": max-cost = 0: the most one call may use is at least 1",
        ),
        (
            "estimate = \"header:x-max-tokens\"\nmax-cost = 101\ncost-from = \"extension\"",
            "limit \"t\": max-cost = 101 is above the capacity 100",
        ),
        (
            "estimate = 5\nmax-cost = 10\ncost-from = \"extension\"",
            "limit \"t\": max-cost = 10 applies to estimate = \"header:NAME\" only: estimate = 5",
        ),
        (
            "max-cost = 10\ncost-from = \"extension\"",
            "limit \"t\": max-cost needs estimate = \"header:NAME\"",
        ),
        (
            "max-cost = -1\nestimate = \"header:x-max-tokens\"\ncost-from = \"extension\"",
            "limit \"t\": ",
        ),
    ];
    for (extra, want) in cases {
        let err = PolicyTable::from_toml(&entry(extra), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{extra}\n=> {err}\n(wanted {want})");
    }
}

#[test]
fn good_settings_are_read() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let tokens = table.entry("tokens").unwrap();
    assert_eq!(
        tokens.estimate,
        Some(Estimate::Header("x-max-tokens".parse().unwrap()))
    );
    assert_eq!(
        tokens
            .cost_from
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("response-header:x-tokens-used")
    );
    assert_eq!(tokens.max_cost, Some(500));
    let fixed = PolicyTable::from_toml(&entry("estimate = 1\ncost-from = \"reported\""), None);
    assert!(
        fixed.is_ok(),
        "a fixed estimate needs no max-cost: {fixed:?}"
    );
}

/// `GET /chat?tokens=N`: says it used N in `x-tokens-used`.
fn router() -> Router {
    Router::new().route(
        "/chat",
        get(|req: axum::extract::Request| async move {
            let used = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("tokens="))
                .unwrap_or("0")
                .to_owned();
            [("x-tokens-used", used)].into_response()
        }),
    )
}

async fn call(app: &Router, tokens: u64, max: Option<u64>) -> axum::response::Response {
    call_with(app, tokens, max.map(|m| m.to_string()).as_deref()).await
}

/// A call with `x-max-tokens: max` as written (none without it).
async fn call_with(app: &Router, tokens: u64, max: Option<&str>) -> axum::response::Response {
    let headers: Vec<(&str, &[u8])> = max.iter().map(|m| ("x-max-tokens", m.as_bytes())).collect();
    let req = get_from("192.0.2.9:1", &format!("/chat?tokens={tokens}"), &headers);
    app.clone().oneshot(req).await.unwrap()
}

/// `router` under the limits of `toml`, in memory, on a manual clock
/// (never advanced); the handle keeps them.
pub(crate) fn applied(toml: &str, router: Router) -> (Router, PolicyHandle) {
    let options = PolicyOptions {
        clock: Some(Arc::new(ManualClock::new())),
        ..PolicyOptions::default()
    };
    let table = PolicyTable::from_toml(toml, None).unwrap();
    table.apply_in_memory(router, &options, None).unwrap()
}

fn ietf(res: &axum::response::Response) -> String {
    let all: Vec<_> = res
        .headers()
        .get_all("ratelimit")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    all.join(", ")
}

#[tokio::test]
async fn a_table_reserves_the_header_s_estimate_and_settles_to_the_response_s_count() {
    let (app, _handle) = applied(TABLE, router());
    // Reserves 400 (the fields show it), uses 100.
    let res = call(&app, 100, Some(400)).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(ietf(&res).contains("\"tokens\";r=600"), "{}", ietf(&res));
    // The next response shows the settlement (900 left), less its own
    // reservation: without the header, max-cost (500).
    let res = call(&app, 1000, None).await;
    assert!(ietf(&res).contains("\"tokens\";r=400"), "{}", ietf(&res));
    // 1000 more used: in debt. The next is refused by the tokens limit,
    // and given back to the requests limit outside it.
    let res = call(&app, 0, None).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(ietf(&res).contains("\"requests\";r=58"), "{}", ietf(&res));
    let res = call(&app, 0, None).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(ietf(&res).contains("\"requests\";r=58"), "{}", ietf(&res));
}

#[tokio::test]
async fn a_header_that_is_not_a_positive_decimal_reserves_max_cost() {
    let (app, _handle) = applied(TABLE, router());
    // Each call uses 0: what it reserved shows in its own fields, then
    // is given back.
    let cases = [
        (None, 500),
        (Some("0"), 500),
        (Some("00"), 500),
        (Some("+0"), 500),
        (Some(" 0 "), 500),
        (Some("-5"), 500),
        (Some("+5"), 500),
        (Some("abc"), 500),
        (Some("1.5"), 500),
        (Some(""), 500),
        (Some("99999999999999999999999"), 500),
        (Some("18446744073709551615"), 500),
        (Some("501"), 500),
        (Some("250"), 250),
        (Some("007"), 7),
        (Some("1"), 1),
    ];
    for (header, reserved) in cases {
        let res = call_with(&app, 0, header).await;
        assert_eq!(res.status(), StatusCode::OK, "{header:?}");
        let want = format!("\"tokens\";r={}", 1000 - reserved);
        assert!(ietf(&res).contains(&want), "{header:?}: {}", ietf(&res));
    }
}

#[tokio::test]
async fn a_zero_header_is_no_peek_for_a_key_in_debt() {
    let (app, _handle) = applied(TABLE, router());
    // 1200 used on a reservation of 500: 200 in debt.
    assert_eq!(call(&app, 1200, None).await.status(), StatusCode::OK);
    for header in ["0", "00", "+0", "abc"] {
        let res = call_with(&app, 0, Some(header)).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{header}");
    }
}
