//! `axum-example`: serves [`axum_example::app`] on `BIND_ADDR`
//! (default `127.0.0.1:3000`), trusting the proxies in `TRUSTED_PROXIES`.

use std::net::SocketAddr;

#[tokio::main]
async fn main() {
    let config = match axum_example::Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("axum-example: TRUSTED_PROXIES: {e}");
            std::process::exit(2);
        }
    };
    let bind = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("axum-example: cannot listen on {bind}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("axum-example: listening on {bind}");
    let app = axum_example::app(&config).into_make_service_with_connect_info::<SocketAddr>();
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    {
        eprintln!("axum-example: {e}");
        std::process::exit(1);
    }
}
