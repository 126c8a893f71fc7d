//! How the P4Runtime server is exposed: the listen address policy, TLS and mutual TLS, and the
//! size limits on what a client may send.
//!
//! P4Runtime gives the primary controller full control of the device, and anyone who reaches the
//! port can become primary by sending a higher election id. So a plaintext server is only allowed
//! on a loopback address; any other address needs TLS (and, to keep unknown clients out, a client
//! CA: mutual TLS), unless the operator forces plaintext knowingly.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

/// Default cap on one gRPC message, either way (bytes). P4Info, a bmv2 JSON device config and a
/// Write of the whole classifier (65536 entries, about 6 MB) fit; a 128 MB request does not.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 32 << 20;
/// Largest cap an operator may set: beyond it one request could hold the server's memory.
pub const MAX_MESSAGE_BYTES_LIMIT: usize = 1 << 30;
/// HTTP/2 header list cap (bytes): P4Runtime carries nothing in headers but the method and
/// metadata; hyper's default (16 MiB) would let a client make the server buffer that much.
pub const MAX_HEADER_LIST_BYTES: u32 = 16 << 10;
/// Concurrent HTTP/2 streams (requests) per connection: a controller needs a stream plus a few
/// unary calls.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 64;

/// PEM files for the server's TLS, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
    /// CA certificate(s) that client certificates must chain to (PEM): mutual TLS. None: any
    /// client may connect (server-authenticated TLS only).
    pub client_ca: Option<PathBuf>,
}

/// The transport side of the server configuration.
#[derive(Clone, Debug)]
pub struct Transport {
    pub tls: Option<TlsFiles>,
    /// Serve plaintext on a non-loopback address anyway (the operator said so).
    pub allow_insecure: bool,
    /// Cap on one decoded (received) or encoded (sent) message, bytes.
    pub max_message_bytes: usize,
    /// With TLS: the handshakes' timeout and how many may be in progress at once.
    pub handshakes: super::handshake::Limits,
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            tls: None,
            allow_insecure: false,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            handshakes: Default::default(),
        }
    }
}

impl Transport {
    /// Checks the policy for `addr`; Err names the option that fixes it.
    pub fn check(&self, addr: &SocketAddr) -> anyhow::Result<()> {
        if self.max_message_bytes < 1 << 16 || self.max_message_bytes > MAX_MESSAGE_BYTES_LIMIT {
            bail!(
                "--grpc-max-message-bytes must be in {}..={} (got {})",
                1 << 16,
                MAX_MESSAGE_BYTES_LIMIT,
                self.max_message_bytes
            );
        }
        self.handshakes.check()?;
        if self.tls.is_none() && !addr.ip().is_loopback() && !self.allow_insecure {
            bail!(
                "--grpc-addr {addr} is not a loopback address and the server has no TLS: anyone who \
                 reaches it could take over the switch. Give --grpc-cert and --grpc-key (and \
                 --grpc-client-ca for mutual TLS), or --grpc-insecure to serve plaintext anyway"
            );
        }
        Ok(())
    }

    /// Logs what an operator should know about an exposed server (called once, when serving).
    pub fn warn_if_exposed(&self, addr: &SocketAddr) {
        if addr.ip().is_loopback() {
            return;
        }
        match &self.tls {
            None => tracing::warn!(%addr, "P4Runtime served in plaintext on a non-loopback address (--grpc-insecure)"),
            Some(TlsFiles { client_ca: None, .. }) => {
                tracing::warn!(%addr, "TLS without --grpc-client-ca: any client that reaches the port may connect")
            }
            Some(_) => {}
        }
    }

    /// The TLS configuration of the server (rustls, as tonic's own `ServerTlsConfig` would make
    /// it: the identity, ALPN h2 and, with a client CA, a client certificate that must chain to
    /// it), with the files read and parsed now so that a bad file fails at start with its name
    /// rather than at the first handshake. The handshakes themselves are p4rt/handshake.rs's.
    pub fn server_tls(&self) -> anyhow::Result<Option<Arc<ServerConfig>>> {
        let Some(files) = &self.tls else { return Ok(None) };
        let cert = read_pem(&files.cert, "--grpc-cert", "CERTIFICATE")?;
        let key = read_pem(&files.key, "--grpc-key", "PRIVATE KEY")?;
        let chain = certificates(&cert, &files.cert, "--grpc-cert")?;
        let key = PrivateKeyDer::from_pem_slice(&key)
            .map_err(|e| anyhow::anyhow!("--grpc-key {}: {e}", files.key.display()))?;
        let builder = ServerConfig::builder();
        let builder = match &files.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let ca = read_pem(path, "--grpc-client-ca", "CERTIFICATE")?;
                let mut roots = RootCertStore::empty();
                roots.add_parsable_certificates(certificates(&ca, path, "--grpc-client-ca")?);
                // No allow_unauthenticated: a client without a certificate is refused.
                let verifier = WebPkiClientVerifier::builder(roots.into())
                    .build()
                    .map_err(|e| anyhow::anyhow!("--grpc-client-ca {}: {e}", path.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| anyhow::anyhow!("--grpc-cert/--grpc-key {}: {e}", files.cert.display()))?;
        // gRPC is HTTP/2: the ALPN a client asks for and tonic's TLS offers.
        config.alpn_protocols.push(b"h2".to_vec());
        Ok(Some(Arc::new(config)))
    }

    pub fn describe(&self) -> &'static str {
        match &self.tls {
            None => "plaintext",
            Some(TlsFiles { client_ca: None, .. }) => "TLS",
            Some(_) => "mutual TLS",
        }
    }
}

/// Reads a PEM file and checks it holds a block of the kind expected (`what` is a substring of
/// the PEM label, so "PRIVATE KEY" accepts PKCS#8, RSA and EC keys).
fn read_pem(path: &Path, option: &str, what: &str) -> anyhow::Result<Vec<u8>> {
    let data = std::fs::read(path).with_context(|| format!("{option} {}", path.display()))?;
    let text = String::from_utf8_lossy(&data);
    let has_block = text.lines().any(|l| l.starts_with("-----BEGIN ") && l.contains(what));
    if !has_block {
        bail!("{option} {}: no PEM {what} block in it", path.display());
    }
    Ok(data)
}

/// The certificates of a PEM file read by [`read_pem`].
fn certificates(pem: &[u8], path: &Path, option: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{option} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn plaintext_only_on_loopback_unless_forced() {
        let t = Transport::default();
        assert!(t.check(&addr("127.0.0.1:9559")).is_ok());
        assert!(t.check(&addr("[::1]:9559")).is_ok());
        let err = t.check(&addr("0.0.0.0:9559")).unwrap_err().to_string();
        assert!(err.contains("--grpc-cert") && err.contains("--grpc-insecure"), "{err}");
        assert!(t.check(&addr("10.1.2.3:9559")).is_err());
        let forced = Transport { allow_insecure: true, ..Transport::default() };
        assert!(forced.check(&addr("0.0.0.0:9559")).is_ok());
        let tls = Transport { tls: Some(TlsFiles::default()), ..Transport::default() };
        assert!(tls.check(&addr("0.0.0.0:9559")).is_ok());
    }

    #[test]
    fn message_cap_has_a_range() {
        for bad in [0, 1000, MAX_MESSAGE_BYTES_LIMIT + 1] {
            let t = Transport { max_message_bytes: bad, ..Transport::default() };
            let err = t.check(&addr("127.0.0.1:1")).unwrap_err().to_string();
            assert!(err.contains("--grpc-max-message-bytes must be in"), "{err}");
        }
    }

    #[test]
    fn handshake_limits_have_a_range() {
        use super::super::handshake::Limits;
        use std::time::Duration;
        let check = |handshakes: Limits| {
            let t = Transport { handshakes, ..Transport::default() };
            t.check(&addr("127.0.0.1:1")).map_err(|e| e.to_string())
        };
        assert_eq!(check(Limits::default()), Ok(()));
        let ms = |ms| Duration::from_millis(ms);
        for (bad, msg) in [
            (
                Limits { timeout: ms(99), ..Limits::default() },
                "--grpc-handshake-timeout-ms must be in 100..=300000 (got 99)",
            ),
            (
                Limits { timeout: ms(300_001), ..Limits::default() },
                "--grpc-handshake-timeout-ms must be in 100..=300000 (got 300001)",
            ),
            (
                Limits { max_pending: 0, ..Limits::default() },
                "--grpc-max-pending-handshakes must be in 1..=65536 (got 0)",
            ),
            (
                Limits { max_pending: 65_537, ..Limits::default() },
                "--grpc-max-pending-handshakes must be in 1..=65536 (got 65537)",
            ),
            (
                Limits { log_window: ms(50), ..Limits::default() },
                "--grpc-handshake-log-window-ms must be in 100..=3600000 (got 50)",
            ),
        ] {
            assert_eq!(check(bad), Err(msg.to_string()));
        }
        for good in [ms(100), ms(1500), ms(300_000)] {
            assert_eq!(check(Limits { timeout: good, ..Limits::default() }), Ok(()));
        }
        assert_eq!(check(Limits { max_pending: 1, ..Limits::default() }), Ok(()));
    }

    #[test]
    fn a_file_without_the_pem_block_is_named() {
        let dir = std::env::temp_dir().join(format!("p4netem-listen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("cert.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let t = Transport {
            tls: Some(TlsFiles { cert: not_pem.clone(), key: not_pem.clone(), client_ca: None }),
            ..Transport::default()
        };
        let err = t.server_tls().unwrap_err().to_string();
        assert!(err.contains("--grpc-cert") && err.contains("no PEM CERTIFICATE"), "{err}");
        let missing = Transport {
            tls: Some(TlsFiles { cert: dir.join("nope.pem"), key: not_pem, client_ca: None }),
            ..Transport::default()
        };
        assert!(format!("{:#}", missing.server_tls().unwrap_err()).contains("nope.pem"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
