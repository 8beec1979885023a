//! Token budget: 60 calls per minute and 10,000 tokens per day per API key
//! (`X-API-Key`), the tokens known only after the handler runs. The tokens
//! limit reserves the request's `x-max-tokens`, capped at 5,000 (5,000
//! without it, or with a value that is not a positive decimal), and
//! settles to the handler's `x-tokens-used`: below the reservation it
//! refunds. The handler uses at most what was reserved
//! (`CostReport::reserved`), so no call overdraws the day's budget, however
//! many overlap. A call the tokens limit refuses is given back to the
//! per-minute limit. The `RateLimit` fields show the reservation; the
//! settlement shows on the next response.
//!
//! ```text
//! cargo run -p tower-ratelimit --example token_budget
//! curl -i -H 'x-api-key: k1' '127.0.0.1:3000/chat?tokens=6000'  # 200, "tokens";r=5000, 5000 used
//! curl -i -H 'x-api-key: k1' -H 'x-max-tokens: 100' '127.0.0.1:3000/chat?tokens=6000'  # 200, r=4900, 100 used
//! curl -i -H 'x-api-key: k1' '127.0.0.1:3000/chat?tokens=10'    # 429 (5000 more would not fit), Retry-After: the window's end
//! ```

use axum::extract::{Extension, Request};
use axum::response::IntoResponse;
use axum::{routing::get, Router};
use std::{error::Error, net::SocketAddr, time::Duration};
use tower_ratelimit::strategy::HeaderCost;
use tower_ratelimit::{
    key::ApiKey, CostFrom, CostReport, FixedWindow, MemoryStore, RateLimitLayer,
};

/// "Uses" `?tokens=N`, at most what the call reserved, and says so in
/// `x-tokens-used`.
async fn chat(report: Option<Extension<CostReport>>, req: Request) -> impl IntoResponse {
    let tokens = req.uri().query().and_then(|q| q.strip_prefix("tokens="));
    let asked = tokens.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    let budget = report.map_or(MAX_TOKENS, |Extension(r)| r.reserved());
    [("x-tokens-used", asked.min(budget).to_string())]
}

/// The most tokens one call may use.
const MAX_TOKENS: u64 = 5000;

fn app() -> Result<Router, Box<dyn Error>> {
    let calls = RateLimitLayer::builder(ApiKey::new())
        .limit(
            "calls",
            MemoryStore::new(FixedWindow::new(60, Duration::from_secs(60))?),
        )
        // What the tokens limit refuses is given back here.
        .refund_on_inner_limit()
        .build()?;
    let day = Duration::from_secs(86_400);
    let tokens = RateLimitLayer::builder(ApiKey::new())
        .limit("tokens", MemoryStore::new(FixedWindow::new(10_000, day)?))
        .cost(
            HeaderCost::new(http::HeaderName::from_static("x-max-tokens"), MAX_TOKENS)?
                .at_most(MAX_TOKENS)?,
        )
        .settle("response-header:x-tokens-used".parse::<CostFrom>()?)
        .build()?;
    Ok(Router::new()
        .route("/chat", get(chat))
        .layer(tokens)
        .layer(calls))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let app = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let addr = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    Ok(axum::serve(tokio::net::TcpListener::bind(addr).await?, app).await?)
}

#[cfg(test)]
mod support;

#[cfg(test)]
mod tests {
    use super::support::{from, header};

    #[tokio::test]
    async fn tokens_settle_within_the_reservation_and_refusals_cost_no_call() {
        let app = super::app().unwrap();
        let call = |tokens: u64| {
            from("203.0.113.7:1", "GET", &format!("/chat?tokens={tokens}"))
                .header("x-api-key", "k1")
        };
        // No x-max-tokens: 5000 reserved, 5000 used of the 6000 asked.
        let res = call(6000).send(&app).await;
        assert_eq!(res.status(), 200);
        assert!(header(&res, "ratelimit").contains("\"tokens\";r=5000;"));
        assert_eq!(header(&res, "x-tokens-used"), "5000");
        // x-max-tokens: 100 reserves 100, and the call uses 100.
        let res = call(6000).header("x-max-tokens", "100").send(&app).await;
        assert_eq!(res.status(), 200);
        assert!(header(&res, "ratelimit").contains("\"tokens\";r=4900;"));
        assert_eq!(header(&res, "x-tokens-used"), "100");
        // 4900 left: a call reserving 5000 does not fit.
        let res = call(10).send(&app).await;
        assert_eq!(res.status(), 429);
        assert!(header(&res, "retry-after").parse::<u64>().unwrap() > 0);
        let res = call(10).send(&app).await;
        assert_eq!(res.status(), 429);
        // Two calls admitted, two refused: only the admitted ones count.
        let fields: Vec<_> = res.headers().get_all("ratelimit").iter().collect();
        assert!(
            fields
                .iter()
                .any(|f| f.to_str().unwrap().starts_with("\"calls\";r=58;")),
            "{fields:?}"
        );
    }
}
