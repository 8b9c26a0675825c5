//! The proxy: one listener, three ways in (HTTP `CONNECT`, absolute-form HTTP, SOCKS5), one decision.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use stockade_policy::{NetDecision, NetRules};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::resolve::Resolver;

/// Refusals kept whole in a [`NetReport`]; all are counted.
const KEPT_REFUSALS: usize = 256;

/// What the proxy is told.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The hosts it lets through.
    pub rules: NetRules,
    /// How it resolves names.
    pub resolver: Resolver,
    /// How long one connection attempt to one address may take.
    pub connect_timeout: Duration,
    /// The API gateways served under `/gateway/NAME/`.
    pub gateways: Vec<crate::gateway::GatewayRoute>,
    /// How gateways reach their upstreams (set with the gateways).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl ProxyConfig {
    /// These rules, the system's resolver, and a 10 s connect timeout.
    pub fn new(rules: NetRules) -> io::Result<Self> {
        Ok(ProxyConfig {
            rules,
            resolver: Resolver::new()?,
            connect_timeout: Duration::from_secs(10),
            gateways: Vec::new(),
            tls: None,
        })
    }

    /// Serves these gateways, reaching their upstreams over TLS with these roots.
    pub fn with_gateways(
        mut self,
        gateways: Vec<crate::gateway::GatewayRoute>,
        roots: rustls::RootCertStore,
    ) -> io::Result<Self> {
        self.gateways = gateways;
        self.tls = Some(crate::gateway::client_config(roots).map_err(io::Error::other)?);
        Ok(self)
    }
}

/// How a program asked for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// HTTP `CONNECT host:port` (a tunnel; HTTPS goes this way).
    Connect,
    /// A plain HTTP request in absolute form (`GET http://host/path`).
    Http,
    /// SOCKS5 `CONNECT`, with a host name or an address.
    Socks5,
    /// A request to an API gateway (`/gateway/NAME/...`), refused for its method or path before any
    /// connection: the host and port are the gateway's upstream.
    Gateway,
}

impl Protocol {
    /// The name used in reports and the audit log.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Connect => "http-connect",
            Protocol::Http => "http",
            Protocol::Socks5 => "socks5",
            Protocol::Gateway => "gateway",
        }
    }
}

/// One connection the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetRefusal {
    /// How it was asked for.
    pub protocol: Protocol,
    /// The host as the program named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The deciding rule, when a `deny` rule decided.
    pub rule: Option<String>,
    /// Why, with what to change.
    pub reason: String,
}

/// What the proxy did in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetReport {
    /// Connections made.
    pub allowed_connections: u64,
    /// Connections refused by the rules, and gateway requests refused for their method or path.
    pub refused_connections: u64,
    /// Requests passed through a gateway.
    pub gateway_requests: u64,
    /// The refusals, whole (at most 256; `refused_connections` counts them all).
    pub refusals: Vec<NetRefusal>,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: ProxyConfig,
    allowed: AtomicU64,
    refused: AtomicU64,
    pub(crate) gateway_requests: AtomicU64,
    refusals: Mutex<Vec<NetRefusal>>,
}

/// Why a connection was not made.
#[derive(Debug)]
enum OpenError {
    /// The rules refused it.
    Refused(NetRefusal),
    /// Allowed, but the name did not resolve or no address answered.
    Unreachable(String),
}

impl State {
    fn refuse(&self, refusal: NetRefusal) -> OpenError {
        self.record_refusal(refusal.clone());
        OpenError::Refused(refusal)
    }

    /// Counts a refusal and keeps it for the report (and so the audit log), as every refusal is.
    pub(crate) fn record_refusal(&self, refusal: NetRefusal) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT_REFUSALS {
            kept.push(refusal);
        }
    }

    /// Decides the host, resolves it, decides each address, and connects to the first allowed address
    /// that answers: the address connected to is always one that was judged.
    async fn open(
        &self,
        protocol: Protocol,
        host: &str,
        port: u16,
    ) -> Result<TcpStream, OpenError> {
        let refusal = |rule: Option<String>, reason: String| NetRefusal {
            protocol,
            host: host.to_string(),
            port,
            rule,
            reason,
        };
        if let NetDecision::Deny { rule, reason } = self.config.rules.decide(host, port) {
            return Err(self.refuse(refusal(rule, reason)));
        }
        let addresses = self
            .config
            .resolver
            .resolve(host, port)
            .await
            .map_err(|e| OpenError::Unreachable(format!("cannot resolve {host}: {e}")))?;
        let mut allowed: Vec<IpAddr> = Vec::new();
        let mut first_denial = None;
        for ip in addresses {
            let special = self.config.resolver.classify(ip);
            match self.config.rules.decide_address(host, ip, port, special) {
                NetDecision::Allow { .. } => allowed.push(ip),
                NetDecision::Deny { rule, reason } => {
                    first_denial.get_or_insert((rule, reason));
                }
            }
        }
        if allowed.is_empty() {
            return Err(match first_denial {
                Some((rule, reason)) => self.refuse(refusal(rule, reason)),
                None => OpenError::Unreachable(format!("{host} has no address")),
            });
        }
        let stream = connect_first(&allowed, port, self.config.connect_timeout)
            .await
            .map_err(|e| {
                OpenError::Unreachable(format!("cannot connect to {host}:{port} ({e})"))
            })?;
        self.allowed.fetch_add(1, Ordering::Relaxed);
        Ok(stream)
    }
}

/// Connects to the first of `addresses` that answers within `timeout` each; the error names the last
/// address tried.
pub(crate) async fn connect_first(
    addresses: &[IpAddr],
    port: u16,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let mut last = io::Error::other("no address");
    for ip in addresses {
        let to = SocketAddr::new(*ip, port);
        match tokio::time::timeout(timeout, TcpStream::connect(to)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => last = io::Error::new(e.kind(), format!("{to}: {e}")),
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, format!("{to}: timed out")),
        }
    }
    Err(last)
}

/// A proxy serving one sandbox, on its own threads, until [`Proxy::finish`].
#[derive(Debug)]
pub struct Proxy {
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Closed to stop the proxy while it still waits for its first connection, before its runtime.
    wake: Option<std::io::PipeWriter>,
    state: Arc<State>,
}

impl Proxy {
    /// Starts serving. `listener` is called on the proxy's thread and yields the socket to accept on (the
    /// sandbox's, which arrives from its init while the supervisor goes on).
    ///
    /// The runtime and its threads are made when the first connection arrives: most runs (a build, a
    /// test, a `grep`) never connect, and on a machine whose scheduler keeps new threads on their
    /// creator's CPU, three threads made at launch held the sandbox's init back (half a millisecond).
    pub fn start<F>(listener: F, config: ProxyConfig) -> io::Result<Proxy>
    where
        F: FnOnce() -> io::Result<TcpListener> + Send + 'static,
    {
        let state = Arc::new(State {
            config,
            allowed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            gateway_requests: AtomicU64::new(0),
            refusals: Mutex::new(Vec::new()),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (woken, wake) = std::io::pipe()?;
        let served = state.clone();
        let thread = std::thread::Builder::new()
            .name("stockade-proxy".into())
            .spawn(move || {
                use std::os::fd::AsRawFd;
                let listener = listener()?;
                if !crate::sys::wait_for_connection(listener.as_raw_fd(), woken.as_raw_fd())? {
                    return Ok(());
                }
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("stockade-proxy")
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    listener.set_nonblocking(true)?;
                    let listener = tokio::net::TcpListener::from_std(listener)?;
                    serve(listener, served, stopped).await
                })
            })?;
        Ok(Proxy {
            thread: Some(thread),
            stop: Some(stop),
            wake: Some(wake),
            state,
        })
    }

    /// Stops serving (open connections are cut) and reports what was allowed and refused.
    pub fn finish(mut self) -> NetReport {
        self.shutdown();
        let refusals = self
            .state
            .refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        NetReport {
            allowed_connections: self.state.allowed.load(Ordering::Relaxed),
            refused_connections: self.state.refused.load(Ordering::Relaxed),
            gateway_requests: self.state.gateway_requests.load(Ordering::Relaxed),
            refusals,
        }
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> io::Result<()> {
    loop {
        tokio::select! {
            _ = &mut stopped => return Ok(()),
            accepted = listener.accept() => {
                // A failed accept (a connection reset while queued, descriptors exhausted) ends only that
                // connection; the listener stays.
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                tokio::spawn(async move {
                    let _ = stream.set_nodelay(true);
                    let _ = handle(stream, state).await;
                });
            }
        }
    }
}

/// Tells SOCKS5 (its first byte is the version, 5) from HTTP (a method's first letter).
async fn handle(stream: TcpStream, state: Arc<State>) -> io::Result<()> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Ok(());
    }
    if first[0] == 5 {
        return socks5(stream, state).await;
    }
    if let Some(head) = peek_forward_head(&stream).await? {
        return forward_spliced(stream, head, state).await;
    }
    let service = hyper::service::service_fn(move |req| http(req, state.clone()));
    hyper::server::conn::http1::Builder::new()
        .preserve_header_case(true)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await
        .map_err(io::Error::other)
}

pub(crate) type Body = BoxBody<Bytes, hyper::Error>;

/// The body of every answer the proxy makes itself.
fn message_body(message: &str) -> String {
    format!("stockade: {message}\n")
}

pub(crate) fn text(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(message_body(message)))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl OpenError {
    /// The answer to the program: 403 for a refusal, 502 for an upstream out of reach, with the reason.
    fn status(self) -> (StatusCode, String) {
        match self {
            OpenError::Refused(r) => (StatusCode::FORBIDDEN, r.reason),
            OpenError::Unreachable(why) => (StatusCode::BAD_GATEWAY, why),
        }
    }
}

fn open_error(error: OpenError) -> Response<Body> {
    let (status, message) = error.status();
    text(status, &message)
}

/// Headers that belong to one hop and are not forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// The header names that the values of a request's `Connection` headers list (they belong to one hop).
fn connection_listed<'a>(values: impl Iterator<Item = &'a [u8]>) -> Vec<&'a str> {
    values
        .filter_map(|v| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect()
}

/// Whether the header `name` belongs to one hop: one of [`HOP_BY_HOP`], or one `Connection` lists.
fn is_hop_by_hop(name: &str, listed: &[&str]) -> bool {
    HOP_BY_HOP
        .iter()
        .chain(listed)
        .any(|hop| name.eq_ignore_ascii_case(hop))
}

/// Removes the headers that belong to one hop, those the client listed in `Connection` included.
pub(crate) fn remove_hop_by_hop(headers: &mut hyper::HeaderMap) {
    let listed = connection_listed(
        headers
            .get_all(hyper::header::CONNECTION)
            .iter()
            .map(HeaderValue::as_bytes),
    );
    let hop: Vec<HeaderName> = headers
        .keys()
        .filter(|name| is_hop_by_hop(name.as_str(), &listed))
        .cloned()
        .collect();
    for name in hop {
        headers.remove(name);
    }
}

async fn http(req: Request<Incoming>, state: Arc<State>) -> Result<Response<Body>, Infallible> {
    if req.method() == Method::CONNECT {
        return Ok(connect(req, state).await);
    }
    Ok(forward(req, state).await)
}

async fn connect(req: Request<Incoming>, state: Arc<State>) -> Response<Body> {
    let Some((host, Some(port))) = req
        .uri()
        .authority()
        .map(|a| (a.host().to_string(), a.port_u16()))
    else {
        return text(
            StatusCode::BAD_REQUEST,
            "CONNECT needs host:port, e.g. CONNECT example.com:443",
        );
    };
    let upstream = match state.open(Protocol::Connect, &host, port).await {
        Ok(s) => s,
        Err(e) => return open_error(e),
    };
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        let mut upstream = upstream;
        // The client's own socket back from hyper (with whatever it read past the request), so the
        // tunnel can splice; any other transport is copied.
        match upgraded.downcast::<TokioIo<TcpStream>>() {
            Ok(parts) => {
                let client = parts.io.into_inner();
                if upstream.write_all(&parts.read_buf).await.is_ok() {
                    let _ = splice_relay(&client, &upstream).await;
                }
            }
            Err(upgraded) => {
                let _ = relay(&mut TokioIo::new(upgraded), &mut upstream).await;
            }
        }
    });
    Response::new(
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
    )
}

/// A plain `http://` request whose head was not whole in the first segment (or is over 16 KiB), relayed
/// through hyper; the others take [`forward_spliced`]. Also the gateways' entry (origin form).
async fn forward(mut req: Request<Incoming>, state: Arc<State>) -> Response<Body> {
    let uri = req.uri().clone();
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the proxy forwards only http:// requests; {other}:// goes through CONNECT"
                ),
            );
        }
        None if uri.path().starts_with(stockade_policy::GATEWAY_PATH) => {
            return crate::gateway::serve(req, &state).await;
        }
        None => {
            return text(
                StatusCode::BAD_REQUEST,
                "this is stockade's network proxy: use it as an HTTP proxy (HTTP_PROXY), not as a server",
            );
        }
    }
    let Some(host) = uri.host().map(str::to_string) else {
        return text(StatusCode::BAD_REQUEST, "the request names no host");
    };
    let port = uri.port_u16().unwrap_or(80);
    let upstream = match state.open(Protocol::Http, &host, port).await {
        Ok(s) => s,
        Err(e) => return open_error(e),
    };
    let handshake = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .title_case_headers(true)
        .handshake(TokioIo::new(upstream))
        .await;
    let (mut sender, connection) = match handshake {
        Ok(pair) => pair,
        Err(e) => return text(StatusCode::BAD_GATEWAY, &format!("{host}:{port}: {e}")),
    };
    tokio::spawn(connection);
    let origin_form = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_default();
    *req.uri_mut() = origin_form;
    remove_hop_by_hop(req.headers_mut());
    match sender.send_request(req).await {
        Ok(response) => response.map(BodyExt::boxed),
        Err(e) => text(StatusCode::BAD_GATEWAY, &format!("{host}:{port}: {e}")),
    }
}

/// The head of a plain `http://` request in absolute form, as the client sent it.
#[derive(Debug)]
struct ForwardHead {
    /// Its length in bytes, up to and including the blank line.
    len: usize,
    host: String,
    port: u16,
    /// The head to send upstream: origin-form, hop-by-hop headers removed, `Connection: close`.
    upstream: Vec<u8>,
}

/// Largest head looked at for the spliced path; a larger one goes through hyper.
const PEEKED_HEAD: usize = 16 * 1024;

/// Looks (without reading) at a request's head: `Some` for a plain `http://` request in absolute form
/// whose head is already all there; `None` for anything else (`CONNECT`, the gateways, a head still on
/// its way or too large, a malformed one), which hyper serves.
async fn peek_forward_head(stream: &TcpStream) -> io::Result<Option<ForwardHead>> {
    let mut buf = vec![0u8; PEEKED_HEAD];
    let n = stream.peek(&mut buf).await?;
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(len)) = request.parse(buf.get(..n).unwrap_or_default())
    else {
        return Ok(None);
    };
    let (Some(method), Some(target), Some(version)) =
        (request.method, request.path, request.version)
    else {
        return Ok(None);
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        return Ok(None);
    }
    let Ok(uri) = target.parse::<hyper::Uri>() else {
        return Ok(None);
    };
    let (Some("http"), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Ok(None);
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(80);
    let listed = connection_listed(
        request
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("connection"))
            .map(|h| h.value),
    );
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut upstream = format!("{method} {path} HTTP/1.{version}\r\n").into_bytes();
    let mut has_host = false;
    for h in request.headers.iter() {
        if is_hop_by_hop(h.name, &listed) {
            continue;
        }
        has_host |= h.name.eq_ignore_ascii_case("host");
        upstream.extend_from_slice(h.name.as_bytes());
        upstream.extend_from_slice(b": ");
        upstream.extend_from_slice(h.value);
        upstream.extend_from_slice(b"\r\n");
    }
    if !has_host {
        upstream.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    // One request per upstream connection: the tunnel below ends with the response, so a next request on
    // the client's connection (perhaps for another host) can never reach this upstream.
    upstream.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some(ForwardHead {
        len,
        host: host.to_string(),
        port,
        upstream,
    }))
}

/// A plain `http://` request, forwarded as a tunnel: the head rewritten to origin form, then the body and
/// the response spliced like a `CONNECT` tunnel (relaying the response through hyper reached only 67 to
/// 79 % of a direct download; BENCHMARKS.md). The client's connection ends with the response.
async fn forward_spliced(
    mut client: TcpStream,
    head: ForwardHead,
    state: Arc<State>,
) -> io::Result<()> {
    let opened = state.open(Protocol::Http, &head.host, head.port).await;
    let mut consumed = vec![0u8; head.len];
    client.read_exact(&mut consumed).await?;
    let mut upstream = match opened {
        Ok(upstream) => upstream,
        Err(e) => {
            let (status, message) = e.status();
            let body = message_body(&message);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return client.write_all(response.as_bytes()).await;
        }
    };
    upstream.write_all(&head.upstream).await?;
    let response = splice_one_way(&upstream, &client);
    let request = splice_one_way(&client, &upstream);
    tokio::pin!(response, request);
    let mut request_done = false;
    loop {
        tokio::select! {
            // The response is whole once the upstream closes: the tunnel ends with it.
            r = &mut response => return r,
            r = &mut request, if !request_done => {
                request_done = true;
                r?;
            }
        }
    }
}

/// SOCKS5 (RFC 1928): no authentication, `CONNECT` only, with an IPv4, IPv6 or domain-name address.
async fn socks5(mut stream: TcpStream, state: Arc<State>) -> io::Result<()> {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await?;
    let mut methods = vec![0u8; usize::from(head[1])];
    stream.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        // No acceptable method.
        return stream.write_all(&[5, 0xff]).await;
    }
    stream.write_all(&[5, 0]).await?;
    let mut request = [0u8; 4];
    stream.read_exact(&mut request).await?;
    let [version, command, _, kind] = request;
    if version != 5 {
        return Ok(());
    }
    let host = match kind {
        1 => {
            let mut a = [0u8; 4];
            stream.read_exact(&mut a).await?;
            IpAddr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            stream.read_exact(&mut a).await?;
            IpAddr::from(a).to_string()
        }
        3 => {
            let len = stream.read_u8().await?;
            let mut name = vec![0u8; usize::from(len)];
            stream.read_exact(&mut name).await?;
            match String::from_utf8(name) {
                Ok(n) => n,
                // 1: general failure.
                Err(_) => return reply(&mut stream, 1).await,
            }
        }
        // 8: address type not supported.
        _ => return reply(&mut stream, 8).await,
    };
    let port = stream.read_u16().await?;
    if command != 1 {
        // 7: command not supported (BIND and UDP ASSOCIATE are not offered).
        return reply(&mut stream, 7).await;
    }
    match state.open(Protocol::Socks5, &host, port).await {
        Ok(upstream) => {
            reply(&mut stream, 0).await?;
            splice_relay(&stream, &upstream).await
        }
        // 2: connection not allowed by ruleset.
        Err(OpenError::Refused(_)) => reply(&mut stream, 2).await,
        // 4: host unreachable.
        Err(OpenError::Unreachable(_)) => reply(&mut stream, 4).await,
    }
}

/// A tunnel between two sockets: both ways at once until both ends are done, each way through a pipe
/// with `splice(2)`, so the bytes never enter this process (a copying relay reached 56 % of a direct
/// download's rate; BENCHMARKS.md). When one side ends its sending, the other side's sending is shut
/// down, as a direct connection would see it; an error on either way ends the tunnel.
async fn splice_relay(a: &TcpStream, b: &TcpStream) -> io::Result<()> {
    tokio::try_join!(splice_one_way(a, b), splice_one_way(b, a)).map(drop)
}

async fn splice_one_way(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use tokio::io::Interest;
    const CHUNK: usize = 1 << 20;
    let (pipe_out, pipe_in) = crate::sys::splice_pipe()?;
    loop {
        from.readable().await?;
        let filled = match from.try_io(Interest::READABLE, || {
            crate::sys::splice(from.as_raw_fd(), pipe_in.as_raw_fd(), CHUNK)
        }) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        let mut left = filled;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                crate::sys::splice(pipe_out.as_raw_fd(), to.as_raw_fd(), left)
            }) {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
    // Half-close: the other side sees the end of this way's bytes, and its own way goes on.
    crate::sys::shutdown_write(to.as_raw_fd())
}

/// Copies both ways until both ends are done (a tunnel whose client end is not a plain socket). Buffers
/// of 256 KiB rather than tokio's 8 KiB: fewer system calls per megabyte.
async fn relay<A, B>(a: &mut A, b: &mut B) -> io::Result<(u64, u64)>
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + ?Sized,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + ?Sized,
{
    const RELAY_BUFFER: usize = 256 * 1024;
    tokio::io::copy_bidirectional_with_sizes(a, b, RELAY_BUFFER, RELAY_BUFFER).await
}

async fn reply(stream: &mut TcpStream, code: u8) -> io::Result<()> {
    stream.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::{Proxy, ProxyConfig};

    fn started() -> (Proxy, std::net::SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let config = ProxyConfig::new(stockade_policy::NetRules::default()).unwrap();
        (Proxy::start(move || Ok(listener), config).unwrap(), address)
    }

    /// A run that never connects never gets the runtime, and finishing it does not wait for one (the
    /// thread waiting for a first connection is woken; a generous deadline turns a hang into a failure).
    #[test]
    fn a_proxy_nobody_connects_to_finishes_at_once() {
        let (proxy, _) = started();
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(proxy.finish()));
        let report = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("finishing a proxy nobody connected to hung");
        assert_eq!(
            (report.allowed_connections, report.refused_connections),
            (0, 0)
        );
    }

    /// The first connection starts the runtime and is served: a host no rule allows is refused with an
    /// answer, and counted.
    #[test]
    fn the_first_connection_is_served() {
        let (proxy, address) = started();
        let mut client = TcpStream::connect(address).unwrap();
        client
            .write_all(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            .unwrap();
        let mut answer = [0u8; 12];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"HTTP/1.1 403");
        let report = proxy.finish();
        assert_eq!(report.refused_connections, 1);
    }
}
