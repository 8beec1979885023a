//! `hyper-example`: a plain hyper server on `BIND_ADDR` (default
//! `127.0.0.1:3001`) with a global limit (GitHub's 5,000 per hour) and a
//! per-IP daily cap (200 per day).

#[tokio::main]
async fn main() {
    let bind = std::env::var("BIND_ADDR").unwrap_or_else(|_| "127.0.0.1:3001".to_owned());
    let svc = match hyper_example::service(hyper_example::Limits::default()) {
        Ok(svc) => svc,
        Err(e) => {
            eprintln!("hyper-example: {e}");
            std::process::exit(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&bind).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hyper-example: cannot listen on {bind}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("hyper-example: listening on {bind}");
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(hyper_example::serve_connection(stream, peer, svc.clone()));
    }
}
