//! [`StallProxy`]: a TCP relay on loopback in front of a real server (the test Dovecot), for the
//! failure a real server will not act out on demand: a peer that stops answering without closing
//! the connection — a NAT or firewall that forgot the connection, a hung server. Nothing is sent
//! either way and nothing is closed, so the client learns of it only by noticing the silence.
//!
//! While it passes, each connection is relayed byte for byte, whatever the protocol (TLS
//! included). [`StallProxy::freeze`] stalls every open connection for good and makes the server
//! unreachable (new connections are closed at once) until [`StallProxy::thaw`]; the stalled
//! connections stay stalled after it, as the forgotten ones would.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The proxy; it stops, and closes its connections, when dropped.
pub struct StallProxy {
    addr: SocketAddr,
    frozen: watch::Sender<bool>,
    relayed: Arc<AtomicUsize>,
    connections: Arc<Mutex<JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut connections) = self.connections.lock() {
            connections.abort_all();
        }
    }
}

impl StallProxy {
    /// Listens on a free loopback port and relays to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<StallProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (frozen, _) = watch::channel(false);
        let relayed = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let accept = tokio::spawn({
            let (frozen, relayed, connections) = (frozen.clone(), relayed.clone(), connections.clone());
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    if *frozen.borrow() {
                        // Unreachable while frozen: the connection is closed at once.
                        drop(client);
                        continue;
                    }
                    relayed.fetch_add(1, Ordering::Relaxed);
                    let stall = frozen.subscribe();
                    if let Ok(mut set) = connections.lock() {
                        // Finished connections are reaped as new ones arrive.
                        while set.try_join_next().is_some() {}
                        set.spawn(async move {
                            let _ = relay(client, upstream, stall).await;
                        });
                    }
                }
            }
        });
        Ok(StallProxy { addr, frozen, relayed, connections, accept })
    }

    /// The port to give the client instead of the server's.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every open connection stops passing bytes, in both directions, and is never closed; new
    /// connections are closed at once until [`Self::thaw`].
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// New connections reach the server again (the frozen ones stay frozen).
    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    /// Connections relayed to the server so far.
    pub fn relayed(&self) -> usize {
        self.relayed.load(Ordering::Relaxed)
    }
}

/// Relay `client` to `upstream` until either side closes, or stall for good once `frozen` turns
/// true (the sockets are held open, unread and unwritten, until the proxy is dropped).
async fn relay(mut client: TcpStream, upstream: SocketAddr, mut frozen: watch::Receiver<bool>) -> io::Result<()> {
    let mut server = TcpStream::connect(upstream).await?;
    let (mut from_client, mut to_client) = client.split();
    let (mut from_server, mut to_server) = server.split();
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        if *frozen.borrow_and_update() {
            std::future::pending::<()>().await;
        }
        tokio::select! {
            read = from_client.read(&mut up) => match read? {
                0 => return Ok(()),
                n => to_server.write_all(&up[..n]).await?,
            },
            read = from_server.read(&mut down) => match read? {
                0 => return Ok(()),
                n => to_client.write_all(&down[..n]).await?,
            },
            // The loop's top looks at the new value; a dropped proxy ends the relay.
            changed = frozen.changed() => if changed.is_err() {
                return Ok(());
            },
        }
    }
}
