//! API gateways: `/gateway/NAME/...` on the proxy's port, forwarded over TLS to an upstream with the
//! headers (keys) only the supervisor holds.
//!
//! The program inside gets a base URL and, where its client insists on a key, a placeholder. Whatever
//! headers of the same names it sends are dropped and replaced, so a placeholder never reaches the
//! upstream and the real key never reaches the sandbox: not in its environment, its files, its
//! arguments or the memory of its processes. Responses come back as the upstream streams them.
//!
//! The gateway is a deputy: it acts for the program with a key the program does not have, so it
//! forwards only what an API call needs (issue 30). A method outside [`FORWARDED_METHODS`] is refused with
//! a 405 (`TRACE` would have the upstream echo the request, key and all, back to the program), and so is a
//! path whose dot segments or encoded separators could take the request outside the upstream's base path
//! ([`check_path`]). Both are refused before any connection, and recorded like the proxy's refusals.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use stockade_policy::{GATEWAY_PATH, Gateway};
use tokio::net::TcpStream;

use crate::proxy::{Body, NetRefusal, Protocol, State, remove_hop_by_hop, text};

/// The methods a gateway forwards: those HTTP APIs are called with. Not `TRACE` (an upstream that
/// implements it answers with the request it got, so the headers the gateway added, the key among them,
/// would come back to the program), not `CONNECT` (a tunnel from the upstream onwards, with the key's
/// authority), and no extension method (WebDAV's and others do whatever each server makes of them, and no
/// API client sends them).
pub(crate) const FORWARDED_METHODS: [Method; 7] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::HEAD,
    Method::OPTIONS,
];

/// Whether a gateway forwards requests with this method.
/// Headers through which common frameworks let a request name another method than its own.
const METHOD_OVERRIDE_HEADERS: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

pub(crate) fn forwards_method(method: &Method) -> bool {
    FORWARDED_METHODS.contains(method)
}

/// Checks the part of a gateway request's path after `/gateway/NAME` (empty, or starting with `/`; the
/// query is not part of it) before it is appended to the upstream's base path. Refused, with the reason:
///
/// - a dot segment, `.` or `..`, in any spelling an upstream may decode to one: percent-encoded
///   (`%2e`, `%2E`, `.%2e`), with a path parameter (`..;x`, which Tomcat and Jetty read as `..`), or a
///   name of dots and spaces only (`...`, `.. `, which Windows servers trim to one);
/// - an encoded separator, `%2f` or `%5c`, or a backslash: an upstream that decodes before it splits, or
///   takes `\` for `/`, sees more segments than were checked; likewise a character that Unicode
///   compatibility folding turns into `.`, `/` or `\` (`%ef%bc%8e` is `．`), and a dot segment ended by
///   an encoded `?` or `#` (`..%3f`), which an upstream that decodes first reads as `..`;
/// - an encoded `%` (`%252e`: a second decoding makes a dot of it), an encoded control character or NUL,
///   bytes that do not decode to UTF-8 (the overlong `%c0%ae` is a dot to some decoders), and a
///   malformed escape.
///
/// Refusing is safer than normalising: normalising would pick one reading of the path, the gateway's,
/// while the request is served by the upstream's, and the upstreams differ (whether they decode before
/// they split, whether `;` starts a parameter, whether `\` separates, how many times they decode). Any
/// difference is a spelling that the gateway resolves inside the base path and the upstream outside it,
/// with the key attached. A refusal has no such gap, and costs nothing: API clients build these paths
/// from fixed names and never send a dot segment or an encoded separator. Empty segments (`a//b`) are
/// left alone: they cannot climb.
pub(crate) fn check_path(rest: &str) -> Result<(), &'static str> {
    for segment in rest.split('/').skip(1) {
        if segment.contains('\\') {
            return Err("a backslash, which some servers take for '/'");
        }
        let decoded = percent_decode(segment).ok_or("a malformed percent escape")?;
        if decoded.iter().any(|b| *b == b'/' || *b == b'\\') {
            return Err(
                "an encoded '/' or '\\' (%2f, %5c), which an upstream may split on after decoding",
            );
        }
        if decoded.contains(&b'%') {
            return Err(
                "an encoded '%' (%25), which a second decoding turns into another character",
            );
        }
        if decoded.iter().any(|b| b.is_ascii_control()) {
            return Err("an encoded control character or NUL");
        }
        let Ok(decoded) = std::str::from_utf8(&decoded) else {
            return Err(
                "encoded bytes that are not UTF-8 (overlong forms spell '.' and '/' for some decoders)",
            );
        };
        if decoded
            .chars()
            .any(|c| FOLDS_TO_A_SEPARATOR_OR_DOT.contains(&c))
        {
            return Err(
                "a character that Unicode compatibility folding (NFKC) turns into '.', '/' or '\\'",
            );
        }
        // What a server sees as the segment's name when it takes `;` for the start of a path parameter,
        // or decodes `%3f` and `%23` before it finds the query and the fragment.
        let name = decoded.split([';', '?', '#']).next().unwrap_or(decoded);
        if !name.is_empty() && name.trim_end_matches([' ', '.']).is_empty() {
            return Err(
                "a dot segment ('.' or '..', in any spelling), which would leave the base path",
            );
        }
    }
    Ok(())
}

/// Characters an upstream that applies Unicode compatibility folding (NFKC) before routing reads as `.`,
/// `/` or `\`: the full-width and small forms and the dot leaders (`．`, `／`, `＼`, `﹒`, `﹨`, `․`,
/// `‥`, `…`).
const FOLDS_TO_A_SEPARATOR_OR_DOT: &[char] = &[
    '\u{FF0E}', '\u{FF0F}', '\u{FF3C}', '\u{FE52}', '\u{FE68}', '\u{2024}', '\u{2025}', '\u{2026}',
];

/// `%XX` escapes decoded once; `None` for a `%` not followed by two hex digits.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Some(out)
}

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
    let gateway = &route.gateway;
    let refuse = |status: StatusCode, reason: String| {
        state.record_refusal(NetRefusal {
            protocol: Protocol::Gateway,
            host: gateway.host.clone(),
            port: gateway.port,
            rule: None,
            reason: reason.clone(),
        });
        text(status, &reason)
    };
    // A method-override header names the method a framework behind the upstream serves instead
    // (`X-HTTP-Method-Override: TRACE` on a POST): it is judged like the method itself.
    let overridden = METHOD_OVERRIDE_HEADERS
        .iter()
        .flat_map(|h| req.headers().get_all(*h))
        .map(|v| Method::from_bytes(v.as_bytes()).unwrap_or(Method::CONNECT))
        .find(|m| !forwards_method(m));
    if let Some(method) = overridden
        .as_ref()
        .or(Some(req.method()).filter(|m| !forwards_method(m)))
    {
        let allowed: Vec<&str> = FORWARDED_METHODS.iter().map(Method::as_str).collect();
        let allowed = allowed.join(", ");
        let mut response = refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "gateway '{}' refuses method {}; it forwards only {allowed} (the methods an API is \
                 called with: an upstream may answer others, TRACE among them, by echoing the request, \
                 and with it the key the gateway adds)",
                gateway.name, method
            ),
        );
        if let Ok(value) = HeaderValue::try_from(allowed) {
            response.headers_mut().insert(hyper::header::ALLOW, value);
        }
        return response;
    }
    if let Err(why) = check_path(rest) {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "gateway '{}' refuses the path '{}': it holds {why}; the gateway forwards only paths \
                 that stay beneath its upstream's base path as written, so name the resource directly",
                gateway.name, rest
            ),
        );
    }
    let Some(tls) = state.config.tls.clone() else {
        return text(StatusCode::BAD_GATEWAY, "the gateway has no TLS settings");
    };
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

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use hyper::Method;
    use stockade_policy::{Gateway, GatewayHeader, NetRules};

    use super::{GatewayRoute, check_path, forwards_method};
    use crate::{Protocol, Proxy, ProxyConfig};

    /// `check_path(rest)` for the part after `/gateway/NAME`: `ok` passes, `no` is refused with a reason
    /// holding the text given.
    macro_rules! paths {
        ($($rest:expr => $want:tt $(($why:expr))?,)*) => {
            $( paths!(@one $rest, $want $(, $why)?); )*
        };
        (@one $rest:expr, ok) => {
            assert_eq!(check_path($rest), Ok(()), "{:?} should pass", $rest);
        };
        (@one $rest:expr, no, $why:expr) => {
            match check_path($rest) {
                Err(reason) => assert!(reason.contains($why), "{:?}: {reason:?} lacks {:?}", $rest, $why),
                Ok(()) => panic!("{:?} should be refused ({})", $rest, $why),
            }
        };
    }

    #[test]
    fn paths_that_could_leave_the_base_path_are_refused() {
        paths! {
            "" => ok,
            "/" => ok,
            "/v1/messages" => ok,
            "/v1/messages/" => ok,
            "/v1//messages" => ok,
            "/v1/..foo/a.b" => ok,
            "/v1/foo..bar" => ok,
            "/v1/.well-known" => ok,
            "/v1/file%2Ejson" => ok,
            "/v1/a%20b" => ok,
            "/v1/caf%C3%A9" => ok,
            "/v1/a;b=c" => ok,
            "/.." => no("dot segment"),
            "/../x" => no("dot segment"),
            "/v1/../../x" => no("dot segment"),
            "/v1/.." => no("dot segment"),
            "/." => no("dot segment"),
            "/./v1" => no("dot segment"),
            "/v1/./x" => no("dot segment"),
            "/%2e%2e/x" => no("dot segment"),
            "/%2E%2E/x" => no("dot segment"),
            "/.%2e/x" => no("dot segment"),
            "/%2e./x" => no("dot segment"),
            "/.%2E" => no("dot segment"),
            "/%2e" => no("dot segment"),
            "/..;/x" => no("dot segment"),
            "/..;jsessionid=1/x" => no("dot segment"),
            "/%2e%2e%3b/x" => no("dot segment"),
            "/.../x" => no("dot segment"),
            "/..%20/x" => no("dot segment"),
            "/v1/..%3f" => no("dot segment"),
            "/v1/..%23/x" => no("dot segment"),
            "/v1/.%3Fa" => no("dot segment"),
            "/v1/%ef%bc%8e%ef%bc%8e/x" => no("NFKC"),
            "/v1/\u{FF0E}\u{FF0E}/x" => no("NFKC"),
            "/v1/%ef%bc%8f..%ef%bc%8f" => no("NFKC"),
            "/v1/a\u{2025}b" => no("NFKC"),
            "/v1/what?" => ok,
            "/v1%2f..%2f..%2fx" => no("encoded '/'"),
            "/v1%2F..%2Fx" => no("encoded '/'"),
            "/v1%2fx" => no("encoded '/'"),
            "/v1%5c..%5cx" => no("encoded '/'"),
            "/v1%5Cx" => no("encoded '/'"),
            "/v1\\..\\x" => no("backslash"),
            "/%252e%252e/x" => no("encoded '%'"),
            "/v1/%25" => no("encoded '%'"),
            "/v1/%00x" => no("control character"),
            "/v1/%0d%0aX-Injected:%201" => no("control character"),
            "/v1/%c0%ae%c0%ae/x" => no("not UTF-8"),
            "/v1/%ff" => no("not UTF-8"),
            "/v1/%zz" => no("malformed"),
            "/v1/%2" => no("malformed"),
            "/v1/%" => no("malformed"),
        }
    }

    #[test]
    fn only_the_methods_an_api_needs_are_forwarded() {
        for (method, forwarded) in [
            ("GET", true),
            ("POST", true),
            ("PUT", true),
            ("PATCH", true),
            ("DELETE", true),
            ("HEAD", true),
            ("OPTIONS", true),
            ("TRACE", false),
            ("CONNECT", false),
            ("TRACK", false),
            ("PROPFIND", false),
            ("MKCOL", false),
            ("DEBUG", false),
            // Methods are case-sensitive: `get` is an extension method, not GET.
            ("get", false),
            ("post", false),
        ] {
            let parsed = Method::from_bytes(method.as_bytes()).unwrap();
            assert_eq!(forwards_method(&parsed), forwarded, "{method}");
        }
    }

    /// A proxy serving gateway `api`, whose upstream (a name that cannot resolve) must never be needed.
    fn with_gateway() -> (Proxy, std::net::SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let gateway = Gateway {
            name: "api".into(),
            host: "upstream.invalid".into(),
            port: 443,
            base_path: "/base".into(),
            url_env: Vec::new(),
            headers: vec![GatewayHeader {
                name: "x-api-key".into(),
                env: "K".into(),
                env_file: None,
                format: "{}".into(),
            }],
            placeholder_env: Vec::new(),
        };
        let route = GatewayRoute::new(gateway, &["the-key".to_string()]).unwrap();
        let config = ProxyConfig::new(NetRules::default())
            .unwrap()
            .with_gateways(vec![route], rustls::RootCertStore::empty())
            .unwrap();
        (Proxy::start(move || Ok(listener), config).unwrap(), address)
    }

    fn ask(address: std::net::SocketAddr, request: &str) -> String {
        let mut client = TcpStream::connect(address).unwrap();
        client.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        answer
    }

    /// A refused method or path is answered by the gateway itself, before any connection (the upstream's
    /// name does not even resolve), and reported as a refusal of the gateway's upstream.
    #[test]
    fn refused_methods_and_paths_are_answered_before_any_connection_and_reported() {
        let (proxy, address) = with_gateway();
        let trace = ask(
            address,
            "TRACE /gateway/api/v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        );
        assert!(trace.starts_with("HTTP/1.1 405"), "{trace}");
        assert!(
            trace
                .to_ascii_lowercase()
                .contains("\r\nallow: get, post, put, patch, delete, head, options\r\n"),
            "{trace}"
        );
        assert!(trace.contains("refuses method TRACE"), "{trace}");
        assert!(!trace.contains("the-key"), "{trace}");
        let dots = ask(
            address,
            "GET /gateway/api/v1/%2e%2e/%2e%2e/x?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        );
        assert!(dots.starts_with("HTTP/1.1 400"), "{dots}");
        assert!(
            dots.contains("refuses the path '/v1/%2e%2e/%2e%2e/x'"),
            "{dots}"
        );
        let overridden = ask(
            address,
            "POST /gateway/api/v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-HTTP-Method-Override: TRACE\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n",
        );
        assert!(overridden.starts_with("HTTP/1.1 405"), "{overridden}");
        assert!(overridden.contains("refuses method TRACE"), "{overridden}");
        let report = proxy.finish();
        assert_eq!(report.refused_connections, 3);
        assert_eq!(report.gateway_requests, 0);
        assert!(
            report
                .refusals
                .iter()
                .all(|r| r.protocol == Protocol::Gateway
                    && r.host == "upstream.invalid"
                    && r.port == 443),
            "{:?}",
            report.refusals
        );
    }
}
