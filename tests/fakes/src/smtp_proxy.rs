//! [`SmtpFaultProxy`]: a TCP relay on loopback in front of a real SMTP server (the test Postfix),
//! for the refusals a real server will not make on demand.
//!
//! While it passes, each new connection is spliced to the server byte for byte. While it
//! refuses, each new connection is answered by the proxy itself, speaking just enough SMTP
//! (RFC 5321) for a client to reach the refusal where a server's policy puts it, at `RCPT TO`:
//! a `220` greeting (§4.2, §3.1), `250` to `EHLO`/`HELO` (§4.1.1.1), `MAIL`, `RSET` and `NOOP`,
//! the chosen reply to every `RCPT TO` (a greylisting `451 4.7.1`, a `550 5.1.1` for a mailbox
//! that does not exist), `554` to `DATA` with no recipient accepted (§3.3: "no valid
//! recipients"), `221` to `QUIT` (§4.1.1.10) and `500` to anything else (§4.2.4). Connections
//! already open when the mode changes keep theirs.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// The name the proxy greets with while it answers for the server.
const HOSTNAME: &str = "mx.example.test";

#[derive(Default)]
struct State {
    /// The reply to `RCPT TO` while refusing (`None`: pass through).
    refusal: Option<String>,
    /// `RCPT TO` commands refused so far.
    refused: usize,
    /// Connections spliced to the server so far.
    relayed: usize,
}

/// The proxy; it stops, and cuts its connections, when dropped.
pub struct SmtpFaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    connections: Arc<Mutex<JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for SmtpFaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut connections) = self.connections.lock() {
            connections.abort_all();
        }
    }
}

impl SmtpFaultProxy {
    /// Listens on a free loopback port and relays to the SMTP server at `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<SmtpFaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let accept = tokio::spawn({
            let (state, connections) = (state.clone(), connections.clone());
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let refusal = {
                        let mut s = lock(&state);
                        if s.refusal.is_none() {
                            s.relayed += 1;
                        }
                        s.refusal.clone()
                    };
                    let state = state.clone();
                    let work = async move {
                        let _ = match refusal {
                            None => relay(client, upstream).await,
                            Some(reply) => refuse(client, &reply, &state).await,
                        };
                    };
                    if let Ok(mut set) = connections.lock() {
                        // Finished connections are reaped as new ones arrive.
                        while set.try_join_next().is_some() {}
                        set.spawn(work);
                    }
                }
            }
        });
        Ok(SmtpFaultProxy { addr, state, connections, accept })
    }

    /// The port to give the client instead of the server's.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// From now on, new connections get `reply` (one line, `NNN text`, e.g. `451 4.7.1 Try
    /// again later`) to every `RCPT TO`.
    pub fn refuse_recipients(&self, reply: &str) {
        let valid = reply.len() > 4 && reply.as_bytes()[..3].iter().all(u8::is_ascii_digit) && reply.as_bytes()[3] == b' ';
        assert!(valid && !reply.contains(['\r', '\n']), "an SMTP reply is one line `NNN text`: {reply:?}");
        lock(&self.state).refusal = Some(reply.to_string());
    }

    /// From now on, new connections reach the server again.
    pub fn pass(&self) {
        lock(&self.state).refusal = None;
    }

    /// `RCPT TO` commands refused so far.
    pub fn refused(&self) -> usize {
        lock(&self.state).refused
    }

    /// Connections passed to the server so far.
    pub fn relayed(&self) -> usize {
        lock(&self.state).relayed
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn relay(mut client: TcpStream, upstream: SocketAddr) -> io::Result<()> {
    let mut server = TcpStream::connect(upstream).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await.map(|_| ())
}

/// One SMTP session answered by the proxy, every recipient refused with `reply`.
async fn refuse(client: TcpStream, reply: &str, state: &Mutex<State>) -> io::Result<()> {
    let (read, mut write) = client.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(format!("220 {HOSTNAME} ESMTP Service ready\r\n").as_bytes()).await?;
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let verb = line.split_whitespace().next().unwrap_or_default().to_ascii_uppercase();
        let answer = match verb.as_str() {
            "EHLO" => format!("250-{HOSTNAME}\r\n250 8BITMIME\r\n"),
            "HELO" => format!("250 {HOSTNAME}\r\n"),
            "MAIL" => "250 2.1.0 Ok\r\n".to_string(),
            "RCPT" => {
                lock(state).refused += 1;
                format!("{reply}\r\n")
            }
            "DATA" => "554 5.5.1 Error: no valid recipients\r\n".to_string(),
            "RSET" | "NOOP" => "250 2.0.0 Ok\r\n".to_string(),
            "QUIT" => {
                write.write_all(b"221 2.0.0 Bye\r\n").await?;
                return Ok(());
            }
            _ => "500 5.5.2 Error: command not recognized\r\n".to_string(),
        };
        write.write_all(answer.as_bytes()).await?;
    }
}
