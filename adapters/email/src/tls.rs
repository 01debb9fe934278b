//! TLS for both mail servers: which CAs are trusted (the system's, or only those of
//! `EMAIL_CA_FILE`), the IMAP stream (tokio-rustls) and lettre's SMTP parameters built from the
//! same roots, and certificate failures told as the person who must fix them needs to read them.
//! Certificate checks are always on; nothing here can switch them off.
//!
//! The rustls config names the ring provider itself: two providers are compiled into the
//! gateway, so there is no process default to rely on.

use lettre::transport::smtp::client::{Certificate, CertificateStore, TlsParameters};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{CertificateError, ClientConfig, RootCertStore};

/// A connection to the IMAP server, encrypted or (loopback only) not.
#[derive(Debug)]
pub(crate) enum MailStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Why a TLS connection was not made.
#[derive(Debug)]
pub(crate) enum TlsFailure {
    /// The server's certificate was refused: retrying cannot help until someone changes the
    /// configuration or the server's certificate. The text names the server, the problem and
    /// what to do.
    Certificate(String),
    /// Anything else (the network, a setup problem); the text says what.
    Other(String),
}

/// The certificates of the PEM file `path` (at least one), or what is wrong with it.
pub(crate) fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the CA file {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the CA file {} is not PEM ({e})", path.display()))?;
    if certs.is_empty() {
        return Err(format!("the CA file {} holds no `BEGIN CERTIFICATE` block; give the CA's certificate in PEM", path.display()));
    }
    Ok(certs)
}

/// The trusted roots: only the CA file's when one is set, else the system's.
fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            for cert in read_ca_file(path)? {
                roots.add(cert).map_err(|e| format!("the CA file {} holds an unusable certificate: {e}", path.display()))?;
            }
        }
        None => {
            // A system certificate rustls cannot parse is skipped, as every TLS client does.
            let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if roots.is_empty() {
                return Err("no trusted root certificates were found on this system; set EMAIL_CA_FILE to your server's CA".into());
            }
        }
    }
    Ok(roots)
}

fn client_config(ca_file: Option<&Path>) -> Result<ClientConfig, String> {
    let roots = roots(ca_file)?;
    ClientConfig::builder_with_provider(Arc::new(tokio_rustls::rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

/// Wrap `tcp` in TLS for `host` (the IMAP server at `port`), checking its certificate.
pub(crate) async fn wrap(tcp: TcpStream, host: &str, port: u16, ca_file: Option<&Path>) -> Result<MailStream, TlsFailure> {
    let name =
        ServerName::try_from(host.to_string()).map_err(|e| TlsFailure::Other(format!("`{host}` is not a valid TLS server name: {e}")))?;
    let config = client_config(ca_file).map_err(TlsFailure::Other)?;
    let connector = TlsConnector::from(Arc::new(config));
    match connector.connect(name, tcp).await {
        Ok(stream) => Ok(MailStream::Tls(Box::new(stream))),
        Err(e) => Err(classify("IMAP", host, port, ca_file, &e)),
    }
}

/// lettre's TLS parameters for the SMTP server `host`, trusting the same roots as IMAP.
pub(crate) fn smtp_parameters(host: &str, ca_file: Option<&Path>) -> Result<TlsParameters, String> {
    let mut builder = TlsParameters::builder(host.to_string());
    if let Some(path) = ca_file {
        // Only the file's CAs, as for IMAP: a private CA does not widen what else is trusted.
        builder = builder.certificate_store(CertificateStore::None);
        for cert in read_ca_file(path)? {
            let cert = Certificate::from_der(cert.to_vec()).map_err(|e| format!("the CA file {}: {e}", path.display()))?;
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build_rustls().map_err(|e| format!("SMTP TLS setup for {host}: {e}"))
}

/// The rustls error somewhere in `error`'s chain (an `io::Error` hides its inner error from
/// `source()`, so each link is opened).
fn find_rustls<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a tokio_rustls::rustls::Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<tokio_rustls::rustls::Error>() {
            return Some(found);
        }
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref())
            && let Some(found) = find_rustls(inner)
        {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// `error` from a TLS handshake with the `role` (IMAP, SMTP) server `host:port`, told plainly.
pub(crate) fn classify(role: &str, host: &str, port: u16, ca_file: Option<&Path>, error: &(dyn std::error::Error + 'static)) -> TlsFailure {
    let server = format!("the {role} server {host}:{port}");
    match find_rustls(error) {
        Some(tokio_rustls::rustls::Error::InvalidCertificate(problem)) => {
            TlsFailure::Certificate(certificate_problem(&server, role, host, ca_file, problem))
        }
        _ => TlsFailure::Other(format!("TLS with {server} failed: {error}")),
    }
}

/// What is wrong with `server`'s certificate and what to do about it.
fn certificate_problem(server: &str, role: &str, host: &str, ca_file: Option<&Path>, problem: &CertificateError) -> String {
    let host_key = format!("EMAIL_{role}_HOST");
    match problem {
        CertificateError::UnknownIssuer => match ca_file {
            Some(path) => format!(
                "{server} presented a certificate that the CA in EMAIL_CA_FILE ({}) did not sign; set EMAIL_CA_FILE to the \
                 CA that signed the server's certificate (PEM), or leave it unset for a server with a public certificate",
                path.display()
            ),
            None => format!(
                "{server} presented a certificate signed by a CA this machine does not trust; if the server uses a private \
                 CA, set EMAIL_CA_FILE to that CA's certificate (PEM)"
            ),
        },
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "{server} presented a certificate that is not valid for the name `{host}` (it names {}); set {host_key} to a \
             name the certificate holds",
            presented.iter().map(|n| plain_name(n)).collect::<Vec<_>>().join(", ")
        ),
        CertificateError::NotValidForName => {
            format!(
                "{server} presented a certificate that is not valid for the name `{host}`; set {host_key} to a name the certificate holds"
            )
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => format!(
            "{server} presented a certificate that has expired or is not valid yet ({problem:?}); the server's certificate \
             must be renewed (or this machine's clock is wrong)"
        ),
        other => format!("{server} presented a certificate that was refused ({other:?}); check the server's certificate"),
    }
}

/// A name as rustls reports it (`DnsName("localhost")`, `IpAddress(127.0.0.1)`), as a person
/// writes it.
fn plain_name(reported: &str) -> &str {
    let inner = reported.split_once('(').and_then(|(_, rest)| rest.strip_suffix(')')).unwrap_or(reported);
    inner.trim_matches('"')
}

impl AsyncRead for MailStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MailStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_flush(cx),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(read_ca_file(&missing).unwrap_err().contains("cannot read the CA file"));
        for (name, contents) in [
            ("words.pem", "not a certificate\n"),
            ("key.pem", "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"),
            ("empty.pem", ""),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, contents).unwrap();
            let err = read_ca_file(&path).unwrap_err();
            assert!(err.contains(&path.display().to_string()) && err.contains("BEGIN CERTIFICATE"), "{name}: {err}");
        }
        let broken = dir.path().join("broken.pem");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\n%%%%\n-----END CERTIFICATE-----\n").unwrap();
        assert!(read_ca_file(&broken).is_err(), "a certificate block that is not base64 is refused");
    }

    #[test]
    fn refused_certificates_are_told_with_the_server_and_the_fix() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            tokio_rustls::rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let TlsFailure::Certificate(why) = classify("IMAP", "mail.example.com", 993, None, &io) else { panic!("a certificate failure") };
        assert!(why.contains("IMAP server mail.example.com:993") && why.contains("EMAIL_CA_FILE"), "{why}");
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        assert!(matches!(classify("SMTP", "h", 465, None, &reset), TlsFailure::Other(_)), "a network failure is not the certificate's");
        assert_eq!(plain_name("DnsName(\"localhost\")"), "localhost");
        assert_eq!(plain_name("IpAddress(127.0.0.1)"), "127.0.0.1");
    }
}
