//! One authenticated HTTP/1.1 GET whose body is streamed chunk by chunk: how a user's file is
//! fetched from Slack (`url_private_download` wants `Authorization: Bearer <bot token>`).
//! slack-morphism reads whole bodies into memory and the crate has no general HTTP client, so
//! this is a small one: a blocking socket (TLS through the adapter's rustls setup unless the
//! configured API is plain http on loopback) on a blocking thread, the body handed over in
//! chunks, a redirect never followed (the token must reach no other host), and the reader
//! stopping as soon as the receiving side stops taking chunks (the byte cap).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Silence on the socket that ends a download.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const CHUNK: usize = 64 * 1024;
/// Response head limits (status line and headers).
const MAX_HEADER_LINES: usize = 100;
const MAX_LINE: usize = 8 * 1024;

/// A body chunk, or why the download failed.
pub(crate) type Chunk = Result<Vec<u8>, String>;

/// Starts `GET url` with the bearer `token` on a blocking thread; the body arrives on the
/// returned channel, which ends when the body is whole. Dropping the receiver stops the read.
pub(crate) fn get(url: url::Url, token: String, tls: Arc<rustls::ClientConfig>) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        if let Err(e) = fetch(&url, &token, tls, &tx) {
            let _ = tx.blocking_send(Err(e));
        }
    });
    rx
}

fn fetch(url: &url::Url, token: &str, tls: Arc<rustls::ClientConfig>, tx: &mpsc::Sender<Chunk>) -> Result<(), String> {
    let host = url.host_str().ok_or("the address has no host")?.to_string();
    let port = url.port_or_known_default().ok_or("the address has no port")?;
    let tcp = connect(&host, port)?;
    let mut stream: Box<dyn ReadWrite> = match url.scheme() {
        "https" => {
            let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
            let connection = rustls::ClientConnection::new(tls, name).map_err(|e| e.to_string())?;
            Box::new(rustls::StreamOwned::new(connection, tcp))
        }
        _ => Box::new(tcp),
    };
    let mut target = url.path().to_string();
    if let Some(query) = url.query() {
        target = format!("{target}?{query}");
    }
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nUser-Agent: hermes\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).and_then(|()| stream.flush()).map_err(|e| e.to_string())?;
    let mut reader = BufReader::with_capacity(CHUNK, stream);
    let head = read_head(&mut reader)?;
    if !(200..300).contains(&head.status) {
        return Err(format!("Slack answered {}", head.status));
    }
    match (head.chunked, head.length) {
        (true, _) => read_chunked(&mut reader, tx),
        (false, Some(length)) => send_exactly(&mut reader, length, tx),
        (false, None) => send_to_end(&mut reader, tx),
    }
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let mut last = String::from("the host has no address");
    for address in (host, port).to_socket_addrs().map_err(|e| e.to_string())? {
        match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
            Ok(tcp) => {
                tcp.set_read_timeout(Some(READ_TIMEOUT)).map_err(|e| e.to_string())?;
                tcp.set_write_timeout(Some(READ_TIMEOUT)).map_err(|e| e.to_string())?;
                return Ok(tcp);
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

struct Head {
    status: u16,
    chunked: bool,
    length: Option<u64>,
}

fn read_head(reader: &mut impl BufRead) -> Result<Head, String> {
    let status_line = read_line(reader)?;
    let status = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok())
        .ok_or("Slack's answer is not HTTP")?;
    let mut head = Head { status, chunked: false, length: None };
    for _ in 0..MAX_HEADER_LINES {
        let line = read_line(reader)?;
        if line.is_empty() {
            return Ok(head);
        }
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = value.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("content-length") {
            head.length = Some(value.parse().map_err(|_| "a bad Content-Length")?);
        }
    }
    Err("too many header lines".to_string())
}

/// One CRLF-terminated line without its terminator.
fn read_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = Vec::new();
    reader.take(MAX_LINE as u64).read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
    if line.last() != Some(&b'\n') {
        return Err("the answer broke off".to_string());
    }
    Ok(String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_string())
}

/// Passes `length` bytes on; `Ok` also when the receiver stopped taking them.
fn send_exactly(reader: &mut impl Read, length: u64, tx: &mpsc::Sender<Chunk>) -> Result<(), String> {
    let mut left = length;
    while left > 0 {
        let mut buf = vec![0; CHUNK.min(left as usize)];
        let n = reader.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the answer broke off".to_string());
        }
        buf.truncate(n);
        left -= n as u64;
        if tx.blocking_send(Ok(buf)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

fn send_to_end(reader: &mut impl Read, tx: &mpsc::Sender<Chunk>) -> Result<(), String> {
    loop {
        let mut buf = vec![0; CHUNK];
        let n = reader.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        buf.truncate(n);
        if tx.blocking_send(Ok(buf)).is_err() {
            return Ok(());
        }
    }
}

fn read_chunked(reader: &mut impl BufRead, tx: &mpsc::Sender<Chunk>) -> Result<(), String> {
    loop {
        let size_line = read_line(reader)?;
        let size = u64::from_str_radix(size_line.split(';').next().unwrap_or_default().trim(), 16).map_err(|_| "a bad chunk size")?;
        if size == 0 {
            return Ok(());
        }
        send_exactly(reader, size, tx)?;
        if tx.is_closed() {
            return Ok(());
        }
        read_line(reader)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(rx: &mut mpsc::Receiver<Chunk>) -> Vec<u8> {
        let mut all = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            all.extend(chunk.unwrap());
        }
        all
    }

    #[test]
    fn chunked_bodies_are_put_back_together() {
        let (tx, mut rx) = mpsc::channel(16);
        let body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
        read_chunked(&mut &body[..], &tx).unwrap();
        assert_eq!(collect(&mut rx), b"hello world");
    }

    /// Ends the server when the test ends, passed or not.
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The production path: TLS with the adapter's rustls setup, against `openssl s_server`
    /// serving a file with a throwaway certificate for `localhost` (signed by a throwaway CA).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_arrives_whole_over_tls() {
        use rustls::pki_types::pem::PemObject;
        let dir = tempfile::tempdir().unwrap();
        let openssl = |args: &str| {
            let made = std::process::Command::new("openssl").args(args.split(' ')).current_dir(dir.path()).output().unwrap();
            assert!(made.status.success(), "openssl {args}: {}", String::from_utf8_lossy(&made.stderr));
        };
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        openssl(&format!("req -x509 {ec} -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca"));
        openssl(&format!("req {ec} -keyout k.pem -out leaf.csr -subj /CN=localhost"));
        std::fs::write(dir.path().join("leaf.ext"), "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n").unwrap();
        openssl("x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out c.pem -days 1 -extfile leaf.ext");
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("f.bin"), &body).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let _server = Server(
            std::process::Command::new("openssl")
                .args(["s_server", "-accept", &format!("127.0.0.1:{port}"), "-cert", "c.pem", "-key", "k.pem", "-WWW", "-quiet"])
                .current_dir(dir.path())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        for _ in 0..100 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls::pki_types::CertificateDer::from_pem_file(dir.path().join("ca.pem")).unwrap()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let url = url::Url::parse(&format!("https://localhost:{port}/f.bin")).unwrap();
        let mut rx = get(url, "xoxb-test".to_string(), Arc::new(tls));
        let mut got = Vec::new();
        while let Some(chunk) = rx.recv().await {
            got.extend(chunk.unwrap());
        }
        assert_eq!(got, body);
    }

    #[test]
    fn the_head_gives_status_and_framing() {
        let head = read_head(&mut &b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX: y\r\n\r\n"[..]).unwrap();
        assert_eq!((head.status, head.chunked, head.length), (200, false, Some(12)));
        let head = read_head(&mut &b"HTTP/1.1 302 Found\r\nLocation: https://elsewhere/\r\n\r\n"[..]).unwrap();
        assert_eq!(head.status, 302);
        assert!(read_head(&mut &b"SSH-2.0-OpenSSH\r\n"[..]).is_err());
    }
}
