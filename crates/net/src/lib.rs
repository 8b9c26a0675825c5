//! The network a sandbox may reach: an allowlist proxy served into its private network namespace.
//!
//! A sandbox whose policy says `net.allow = [...]` gets a private network namespace (loopback only, so no
//! route to anything) and one listening socket inside it, `127.0.0.1:3128`, made by the sandbox's init and
//! handed to the supervisor (`stockade_sandbox::ProxyListener`). The supervisor serves it with a
//! [`Proxy`]: HTTP `CONNECT` (HTTPS and any TCP), absolute-form HTTP, and SOCKS5 with host names, all on
//! the one port. Once a connection is decided its bytes are spliced (`splice(2)`), never copied through
//! the supervisor; a plain HTTP request gets one upstream connection, closed with its response. The program finds it through `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and the rest
//! (`stockade_sandbox::proxy_env`).
//!
//! # Security model
//!
//! - The boundary is the network namespace, not the proxy: a program that ignores the variables, dials an
//!   address itself or sends UDP has no route and gets `ENETUNREACH`. The proxy is the only way out, so
//!   its decision is the only one that allows.
//! - Each connection is decided twice from the same [`stockade_policy::NetRules`]: the host as the
//!   program named it (deny wins; nothing unlisted passes), then every address the proxy itself resolved
//!   it to. Loopback, private, link-local (cloud metadata), unroutable and this host's own addresses are
//!   refused unless an `allow` rule names the address. The proxy connects only to an address it judged,
//!   with no second lookup in between.
//! - The proxy runs outside the sandbox, in the supervisor, with the supervisor's network. It reads
//!   nothing the program controls but the bytes of its requests, which hyper or httparse (hyper's own
//!   head parser, for a plain HTTP request forwarded as a tunnel) parses; SOCKS5's few fixed fields are
//!   read by hand. A plain HTTP request gets an upstream connection of its own, closed with the response,
//!   so whatever else the program sends on it reaches only the host already decided, as through
//!   `CONNECT`.
//! - A gateway (`/gateway/NAME/...`) is a deputy: it adds a key the program must never see, so it must
//!   not be led to hand the key back or to spend it outside what the policy names (issue 30). It
//!   forwards only `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, `HEAD` and `OPTIONS` (a `TRACE` that the
//!   upstream answers echoes the request, the added header with it; anything else gets a 405 naming the
//!   allowed methods). It refuses, with a 400, a path holding a dot segment in any spelling (`..`, `.`,
//!   `%2e%2e`, `.%2E`, `..;x`), an encoded `/` or `\` (`%2f`, `%5c`), a backslash, a double-encoded
//!   `%`, a control character or bytes that are not UTF-8, rather than normalising it: a normalised path
//!   is the gateway's reading, and the upstream that serves it may read the same bytes another way.
//!   Both refusals come before any connection and are reported and audited like the proxy's others
//!   (protocol `gateway`, with the upstream's host and port). The file a key is read from (`env-file`)
//!   is denied by the policy itself, so in every layer (`stockade_policy`).
//!
//! # Limitations
//!
//! TLS passes through untouched: a `CONNECT` to an allowed name may carry any SNI or `Host` inside the
//! tunnel (domain fronting through a CDN that serves both). Only TCP is proxied: no UDP, so no QUIC and
//! no DNS from inside. The host's addresses are read when the proxy starts. A gateway's responses are
//! the upstream's, unread: an upstream that puts the key it received into an ordinary answer (an
//! error that quotes the request's headers) hands it to the program, and no method or path check can
//! stop that; the upstream is trusted as the policy names it.

mod gateway;
mod proxy;
mod resolve;
mod setup;
mod sys;

pub use gateway::{GatewayRoute, system_roots};
pub use proxy::{NetRefusal, NetReport, Protocol, Proxy, ProxyConfig};
pub use resolve::Resolver;
pub use setup::{SetupError, proxy_config_for, serve_sandbox};
