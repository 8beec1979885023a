//! The accept loop handed to tonic: at most `max` connections at once,
//! and a backoff on accept errors that would recur at once (tonic's own
//! loop retries them in a busy loop).

use futures_util::Stream;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tower_ratelimit::serve::{AcceptBackoff, Throttled};

/// An accepted connection, holding its slot until it is dropped.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
}

struct Loop {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    max: usize,
    backoff: AcceptBackoff,
    full: Throttled,
}

/// The connections of `listener`, at most `max` open at once.
pub(crate) fn accept(
    listener: TcpListener,
    max: usize,
) -> impl Stream<Item = Result<Conn, Infallible>> {
    let state = Loop {
        listener,
        slots: Arc::new(Semaphore::new(max.max(1))),
        max,
        backoff: AcceptBackoff::new(),
        full: Throttled::new(),
    };
    futures_util::stream::unfold(state, |mut state| async move {
        let conn = state.next().await;
        Some((Ok(conn), state))
    })
}

impl Loop {
    async fn next(&mut self) -> Conn {
        if self.slots.available_permits() == 0 {
            let max = self.max;
            self.full.warn(|skipped| {
                tracing::warn!(
                    max,
                    skipped,
                    "connection limit reached; not accepting until one closes"
                );
            });
        }
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        loop {
            match self.listener.accept().await {
                Ok((stream, _)) => {
                    self.backoff.succeeded();
                    let _ = stream.set_nodelay(true);
                    return Conn {
                        stream,
                        _slot: slot,
                    };
                }
                Err(e) => {
                    let delay = self.backoff.failed(&e);
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                }
            }
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
