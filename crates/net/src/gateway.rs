//! API gateways: `/gateway/NAME/...` on the proxy's port, forwarded over TLS to an upstream with the
//! headers (keys) only the supervisor holds.
//!
//! The program inside gets a base URL and, where its client insists on a key, a placeholder. Whatever
//! headers of the same names it sends are dropped and replaced, so a placeholder never reaches the
//! upstream and the real key never reaches the sandbox: not in its environment, its files, its
//! arguments or the memory of its processes. Responses come back as the upstream streams them.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use stockade_policy::{GATEWAY_PATH, Gateway};
use tokio::net::TcpStream;

use crate::proxy::{Body, State, remove_hop_by_hop, text};

/// A gateway with its header values, read when the run started.
#[derive(Clone)]
pub struct GatewayRoute {
    gateway: Gateway,
    headers: Vec<(HeaderName, HeaderValue)>,
}

// Never print the values.
impl std::fmt::Debug for GatewayRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayRoute")
            .field("gateway", &self.gateway.name)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl GatewayRoute {
    /// A gateway and the secret for each of its headers, in the order of `gateway.headers`.
    pub fn new(gateway: Gateway, secrets: &[String]) -> Result<Self, String> {
        if secrets.len() != gateway.headers.len() {
            return Err(format!(
                "gateway '{}' has {} headers but {} values were given",
                gateway.name,
                gateway.headers.len(),
                secrets.len()
            ));
        }
        let mut headers = Vec::new();
        for (header, secret) in gateway.headers.iter().zip(secrets) {
            let name = HeaderName::try_from(header.name.as_str())
                .map_err(|_| format!("'{}' is not a header name", header.name))?;
            let mut value = HeaderValue::try_from(header.format.replacen("{}", secret, 1))
                .map_err(|_| {
                    format!(
                        "the value of ${} for header '{}' of gateway '{}' holds characters a header cannot carry",
                        header.env, header.name, gateway.name
                    )
                })?;
            value.set_sensitive(true);
            headers.push((name, value));
        }
        Ok(GatewayRoute { gateway, headers })
    }
}

/// The system's PEM bundle of trust roots (Debian's `ca-certificates`).
pub(crate) const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Trust roots from a PEM bundle: `$SSL_CERT_FILE` when set, else the system's
/// (`/etc/ssl/certs/ca-certificates.crt`).
pub fn system_roots(bundle: Option<&Path>) -> io::Result<rustls::RootCertStore> {
    let path = bundle.unwrap_or(Path::new(SYSTEM_BUNDLE));
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
    for cert in certs {
        let cert = cert.map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
        // A certificate the verifier cannot use is skipped, as every TLS client does with bundles.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(io::Error::other(format!(
            "{}: no usable certificate",
            path.display()
        )));
    }
    Ok(roots)
}

pub(crate) fn client_config(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Serves `/gateway/NAME/rest?query` as `UPSTREAM/rest?query`.
pub(crate) async fn serve(mut req: Request<Incoming>, state: &State) -> Response<Body> {
    let path = req.uri().path().to_string();
    let after = path.strip_prefix(GATEWAY_PATH).unwrap_or("");
    let (name, rest) = match after.find('/') {
        Some(i) => after.split_at(i),
        None => (after, ""),
    };
    let Some(route) = state
        .config
        .gateways
        .iter()
        .find(|r| r.gateway.name == name)
    else {
        let names: Vec<_> = state
            .config
            .gateways
            .iter()
            .map(|r| r.gateway.name.as_str())
            .collect();
        return text(
            StatusCode::NOT_FOUND,
            &format!(
                "no gateway '{name}' (this policy has: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        );
    };
    let Some(tls) = state.config.tls.clone() else {
        return text(StatusCode::BAD_GATEWAY, "the gateway has no TLS settings");
    };
    let gateway = &route.gateway;
    let target = format!(
        "{}{}{}",
        gateway.base_path,
        if rest.is_empty() { "/" } else { rest },
        req.uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default()
    );
    let Ok(target) = target.parse::<hyper::Uri>() else {
        return text(
            StatusCode::BAD_REQUEST,
            "the request path cannot be forwarded",
        );
    };
    let upstream = match connect(state, gateway, tls).await {
        Ok(s) => s,
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "gateway '{}': {}:{}: {e}",
                    gateway.name, gateway.host, gateway.port
                ),
            );
        }
    };
    let handshake = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(EndWithoutCloseNotify(upstream)))
        .await;
    let (mut sender, connection) = match handshake {
        Ok(pair) => pair,
        Err(e) => {
            return text(
                StatusCode::BAD_GATEWAY,
                &format!("gateway '{}': {e}", gateway.name),
            );
        }
    };
    tokio::spawn(connection);
    *req.uri_mut() = target;
    let headers = req.headers_mut();
    remove_hop_by_hop(headers);
    let host = if gateway.port == 443 {
        gateway.host.clone()
    } else {
        format!("{}:{}", gateway.host, gateway.port)
    };
    if let Ok(host) = HeaderValue::try_from(host) {
        headers.insert(hyper::header::HOST, host);
    }
    for (name, value) in &route.headers {
        headers.remove(name);
        headers.insert(name.clone(), value.clone());
    }
    state.gateway_requests.fetch_add(1, Ordering::Relaxed);
    match sender.send_request(req).await {
        Ok(response) => response.map(BodyExt::boxed),
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            &format!("gateway '{}': {e}", gateway.name),
        ),
    }
}

/// An upstream TLS stream whose end without TLS `close_notify` reads as a plain end of stream. A server
/// that ends a response by closing the connection (no length, no chunks: the usual way to end an event
/// stream over HTTP/1.0 semantics) often skips `close_notify`; rustls reports that as an error, which
/// would reach the program as a response cut short after its last byte (and Claude Code then sends its
/// request again). Framed bodies lose nothing: hyper still refuses a length or a chunk cut short.
struct EndWithoutCloseNotify<S>(S);

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EndWithoutCloseNotify<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match std::pin::Pin::new(&mut self.0).poll_read(cx, buf) {
            std::task::Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                std::task::Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for EndWithoutCloseNotify<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

async fn connect(
    state: &State,
    gateway: &Gateway,
    tls: Arc<rustls::ClientConfig>,
) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let addresses = state
        .config
        .resolver
        .resolve(&gateway.host, gateway.port)
        .await?;
    let tcp =
        crate::proxy::connect_first(&addresses, gateway.port, state.config.connect_timeout).await?;
    let name =
        ServerName::try_from(gateway.host.clone()).map_err(|e| io::Error::other(e.to_string()))?;
    // The handshake has the connect's time limit too: an upstream that accepts and then says nothing
    // must not hold the program's request forever.
    let handshake = tokio_rustls::TlsConnector::from(tls).connect(name, tcp);
    tokio::time::timeout(state.config.connect_timeout, handshake)
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no TLS handshake within {} s",
                    state.config.connect_timeout.as_secs_f64()
                ),
            )
        })?
}
