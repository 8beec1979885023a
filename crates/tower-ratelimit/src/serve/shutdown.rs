//! The signal to stop serving (`shutdown_signal`): Ctrl-C, or SIGTERM.

/// Completes on Ctrl-C (SIGINT) or, on Unix, SIGTERM. The handlers are
/// installed when this is called (inside the runtime), not when the future
/// is first polled, so a signal that arrives as soon as the server says it
/// listens is not lost.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        async fn recv(signal: Option<Signal>) {
            match signal {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let int = signal(SignalKind::interrupt()).ok();
        let term = signal(SignalKind::terminate()).ok();
        async move {
            tokio::select! {
                () = recv(int) => tracing::info!("SIGINT: shutting down"),
                () = recv(term) => tracing::info!("SIGTERM: shutting down"),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("SIGINT: shutting down");
        } else {
            std::future::pending::<()>().await;
        }
    }
}
