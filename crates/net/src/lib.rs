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
//!
//! # Limitations
//!
//! TLS passes through untouched: a `CONNECT` to an allowed name may carry any SNI or `Host` inside the
//! tunnel (domain fronting through a CDN that serves both). Only TCP is proxied: no UDP, so no QUIC and
//! no DNS from inside. The host's addresses are read when the proxy starts.

mod gateway;
mod proxy;
mod resolve;
mod setup;
mod sys;

pub use gateway::{GatewayRoute, system_roots};
pub use proxy::{NetRefusal, NetReport, Protocol, Proxy, ProxyConfig};
pub use resolve::Resolver;
pub use setup::{SetupError, proxy_config_for, serve_sandbox};
