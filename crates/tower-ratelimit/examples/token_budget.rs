//! Token budget: 60 calls per minute and 10,000 tokens per day per API key
//! (`X-API-Key`), the tokens known only after the handler runs. The tokens
//! limit reserves the request's `x-max-tokens` (1 without it) and settles
//! to the handler's `x-tokens-used`: below the reservation it refunds,
//! above it the key goes into debt and its next calls get 429 until the
//! day's window ends. A call the tokens limit refuses is given back to the
//! per-minute limit. The `RateLimit` fields show the reservation; the
//! settlement shows on the next response.
//!
//! ```text
//! cargo run -p tower-ratelimit --example token_budget
//! curl -i -H 'x-api-key: k1' '127.0.0.1:3000/chat?tokens=6000'  # 200, "tokens";r=9999
//! curl -i -H 'x-api-key: k1' '127.0.0.1:3000/chat?tokens=6000'  # 200, r=3999: into debt
//! curl -i -H 'x-api-key: k1' '127.0.0.1:3000/chat?tokens=10'    # 429, Retry-After: the window's end
//! ```

use axum::extract::Request;
use axum::response::IntoResponse;
use axum::{routing::get, Router};
use std::{error::Error, net::SocketAddr, sync::Arc, time::Duration};
use tower_ratelimit::policy::HeaderCost;
use tower_ratelimit::{key::ApiKey, CostFrom, FixedWindow, MemoryStore, RateLimitLayer};

/// "Uses" `?tokens=N` and says so in `x-tokens-used`.
async fn chat(req: Request) -> impl IntoResponse {
    let tokens = req.uri().query().and_then(|q| q.strip_prefix("tokens="));
    let used = tokens.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    [("x-tokens-used", used.to_string())]
}

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
        .limit_shared(
            "tokens",
            Arc::new(MemoryStore::new(FixedWindow::new(10_000, day)?)),
        )
        .cost(HeaderCost::new(
            http::HeaderName::from_static("x-max-tokens"),
            1,
        ))
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
    async fn tokens_settle_into_debt_and_refusals_cost_no_call() {
        let app = super::app().unwrap();
        let call = |tokens: u64| {
            from("203.0.113.7:1", "GET", &format!("/chat?tokens={tokens}"))
                .header("x-api-key", "k1")
        };
        let res = call(6000).send(&app).await;
        assert_eq!(res.status(), 200);
        assert!(header(&res, "ratelimit").contains("\"tokens\";r=9999;"));
        let res = call(6000).send(&app).await;
        assert_eq!(res.status(), 200);
        assert!(header(&res, "ratelimit").contains("\"tokens\";r=3999;"));
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
