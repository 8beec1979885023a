//! `axum-example`: serves [`axum_example::app`] on `BIND_ADDR`
//! (default `127.0.0.1:3000`), trusting the proxies in `TRUSTED_PROXIES`
//! and reading only the header named by `TRUSTED_PROXY_HEADER`.
//! With `REDIS_URL` set (`redis://host:port/db`), the limits live in Redis
//! and every copy of the app shares them; otherwise they are in memory.

use axum_example::{app_with, MemoryStores, RedisStores};
use std::net::SocketAddr;

#[tokio::main]
async fn main() {
    let config = match axum_example::Config::from_env() {
        Ok(config) => config,
        Err(e) => fail(2, &e.to_string()),
    };
    let app = match std::env::var("REDIS_URL") {
        Ok(url) => match RedisStores::new(&url) {
            Ok(stores) => {
                eprintln!("axum-example: limits in Redis (REDIS_URL), shared by every copy");
                app_with(&config, &stores)
            }
            Err(e) => fail(2, &format!("REDIS_URL: {e}")),
        },
        Err(_) => {
            eprintln!("axum-example: limits in memory (set REDIS_URL to share them)");
            app_with(&config, &MemoryStores)
        }
    };
    let bind = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => fail(1, &format!("cannot listen on {bind}: {e}")),
    };
    eprintln!("axum-example: listening on {bind}");
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    {
        fail(1, &e.to_string());
    }
}

fn fail(code: i32, message: &str) -> ! {
    eprintln!("axum-example: {message}");
    std::process::exit(code);
}
