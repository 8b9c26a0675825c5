//! Network rules: which hosts a sandbox's proxy lets the program reach.
//!
//! A profile's `net` is `"none"` (a private network namespace with only loopback), `"all"` (the host's
//! network), or a table of host rules:
//!
//! ```toml
//! [profile.p.net]
//! allow = ["github.com", "*.github.com", "registry.npmjs.org:443", "10.0.0.7"]
//! deny = ["gist.github.com"]
//! ```
//!
//! A rule is an exact host name, `*.name` (every subdomain of `name`, not `name` itself), or an IP
//! address (`[v6]` with a port), each optionally with `:port`. Names are compared case-insensitively and
//! without a trailing dot. `deny` wins over `allow`; a host no rule allows is refused.
//!
//! The rules decide names, and the proxy then decides the addresses a name resolves to: loopback,
//! private, link-local and the host's own addresses are refused unless an `allow` rule names that address
//! itself (a name that resolves to 127.0.0.1 must not reach the host's services). [`NetRules`] decides
//! both; the proxy (`stockade-net`) does the resolving.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Serialize, Serializer};

use crate::PolicyError;

/// What network a sandbox has, once resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NetAccess {
    /// A private network namespace with only loopback.
    #[default]
    None,
    /// The host's network.
    All,
    /// A private network namespace whose only way out is a proxy that applies these rules.
    Filtered(NetRules),
}

impl NetAccess {
    /// Whether the program gets a private network namespace (everything but `all`).
    pub fn private_namespace(&self) -> bool {
        !matches!(self, NetAccess::All)
    }

    /// The proxy's rules, when there is a proxy.
    pub fn rules(&self) -> Option<&NetRules> {
        match self {
            NetAccess::Filtered(rules) => Some(rules),
            NetAccess::None | NetAccess::All => None,
        }
    }
}

impl Serialize for NetAccess {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            NetAccess::None => s.serialize_str("none"),
            NetAccess::All => s.serialize_str("all"),
            NetAccess::Filtered(rules) => rules.serialize(s),
        }
    }
}

impl fmt::Display for NetAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetAccess::None => f.write_str("none (loopback only)"),
            NetAccess::All => f.write_str("all (the host's network)"),
            NetAccess::Filtered(rules) => {
                let list = |r: &[HostRule]| {
                    r.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                if rules.allow.is_empty() {
                    f.write_str("through the proxy: no host allowed")?;
                } else {
                    write!(f, "through the proxy: allow {}", list(&rules.allow))?;
                }
                if !rules.deny.is_empty() {
                    write!(f, "; deny {}", list(&rules.deny))?;
                }
                Ok(())
            }
        }
    }
}

/// Allow and deny rules, in the order written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct NetRules {
    /// Hosts the proxy lets through.
    pub allow: Vec<HostRule>,
    /// Hosts refused even where an `allow` rule matches.
    pub deny: Vec<HostRule>,
}

/// One rule: a host pattern and an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// What host it matches.
    pub host: HostPattern,
    /// The port it is limited to, if any.
    pub port: Option<u16>,
}

/// The host part of a [`HostRule`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostPattern {
    /// Exactly this name (lower case, no trailing dot).
    Name(String),
    /// Every subdomain of this name (`*.example.com`: `a.example.com`, `a.b.example.com`; not
    /// `example.com`).
    Subdomains(String),
    /// This address: a connection to it is allowed even where it is loopback or private.
    Address(IpAddr),
}

impl Serialize for HostRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.host, self.port) {
            (HostPattern::Name(n), None) => f.write_str(n),
            (HostPattern::Name(n), Some(p)) => write!(f, "{n}:{p}"),
            (HostPattern::Subdomains(n), None) => write!(f, "*.{n}"),
            (HostPattern::Subdomains(n), Some(p)) => write!(f, "*.{n}:{p}"),
            (HostPattern::Address(IpAddr::V6(a)), Some(p)) => write!(f, "[{a}]:{p}"),
            (HostPattern::Address(a), Some(p)) => write!(f, "{a}:{p}"),
            (HostPattern::Address(a), None) => write!(f, "{a}"),
        }
    }
}

impl HostRule {
    /// Parses `name`, `*.name`, `1.2.3.4`, `::1` or `[::1]`, each optionally with `:port`.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let bad = |why: &str| {
            PolicyError::invalid(
                format!("net rule '{text}'"),
                why.to_string(),
                "write a host name (`example.com`), a subdomain pattern (`*.example.com`) or an IP \
                 address, each optionally with `:port`",
            )
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(bad("it is empty"));
        }
        // A bare IPv6 address has colons of its own; with a port it must be bracketed.
        if let Ok(v6) = trimmed.parse::<Ipv6Addr>() {
            return Ok(HostRule {
                host: HostPattern::Address(IpAddr::V6(v6)),
                port: None,
            });
        }
        let (host, port) = if let Some(rest) = trimmed.strip_prefix('[') {
            let (inside, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("a '[' without its ']'"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("only ':port' may follow ']'"))?,
                ),
            };
            let v6: Ipv6Addr = inside
                .parse()
                .map_err(|_| bad("the bracketed part is not an IPv6 address"))?;
            (HostPattern::Address(IpAddr::V6(v6)), port)
        } else {
            let (host, port) = match trimmed.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (trimmed, None),
            };
            (parse_host(host).map_err(|why| bad(&why))?, port)
        };
        let port = port
            .map(|p| match p.parse::<u16>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(bad("the port is not a number from 1 to 65535")),
            })
            .transpose()?;
        Ok(HostRule { host, port })
    }

    /// Whether this rule matches a host name (already [`normalize_host`]d) and port.
    fn matches_name(&self, name: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match &self.host {
            HostPattern::Name(n) => n == name,
            HostPattern::Subdomains(parent) => name
                .strip_suffix(parent.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            HostPattern::Address(a) => name.parse::<IpAddr>().is_ok_and(|ip| same_ip(ip, *a)),
        }
    }

    fn names_address(&self, ip: IpAddr, port: u16) -> bool {
        matches!(self.host, HostPattern::Address(a) if same_ip(a, ip))
            && self.port.is_none_or(|p| p == port)
    }
}

fn parse_host(host: &str) -> Result<HostPattern, String> {
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return Ok(HostPattern::Address(IpAddr::V4(v4)));
    }
    let (wild, name) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    let name = normalize_host(name);
    if name.is_empty() {
        return Err("the host name is empty".into());
    }
    if name.contains('*') {
        return Err("'*' may only start a rule, as in '*.example.com'".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        || name.split('.').any(str::is_empty)
    {
        return Err(format!(
            "'{name}' is not a host name (letters, digits, '-', '_' and dots; write non-ASCII names in \
             their xn-- form)"
        ));
    }
    Ok(if wild {
        HostPattern::Subdomains(name)
    } else {
        HostPattern::Name(name)
    })
}

/// A host name as rules compare it: lower case, without a trailing dot.
pub fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Compares addresses with IPv4-mapped IPv6 addresses taken as the IPv4 address they carry.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    canonical_ip(a) == canonical_ip(b)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it carries; anything else unchanged.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// Why the proxy refuses a connection, or lets it through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum NetDecision {
    /// Allowed by this rule.
    Allow {
        /// The rule, as written.
        rule: String,
    },
    /// Refused.
    Deny {
        /// The deciding rule, when one did (a `deny` rule); `None` when no `allow` rule matched.
        rule: Option<String>,
        /// Why, in words.
        reason: String,
    },
}

impl NetDecision {
    /// Whether the connection may go ahead.
    pub fn is_allow(&self) -> bool {
        matches!(self, NetDecision::Allow { .. })
    }
}

/// The kinds of address a name may not resolve to unless a rule names the address itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecialAddress {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7.
    Private,
    /// 169.254/16 (cloud metadata lives here), fe80::/10.
    LinkLocal,
    /// 0.0.0.0/8, ::, multicast, broadcast: nothing a client should dial.
    Unroutable,
    /// An address of one of the host's own interfaces.
    Host,
}

impl fmt::Display for SpecialAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpecialAddress::Loopback => "a loopback address",
            SpecialAddress::Private => "a private address",
            SpecialAddress::LinkLocal => {
                "a link-local address (where cloud metadata services answer)"
            }
            SpecialAddress::Unroutable => "an address no client should dial",
            SpecialAddress::Host => "an address of this host",
        })
    }
}

/// Classifies an address by its range alone (the host's own addresses are the proxy's to add).
pub fn special_address(ip: IpAddr) -> Option<SpecialAddress> {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some(SpecialAddress::Loopback)
            } else if v4.is_private() || (a == 100 && (64..128).contains(&b)) {
                Some(SpecialAddress::Private)
            } else if v4.is_link_local() {
                Some(SpecialAddress::LinkLocal)
            } else if a == 0 || v4.is_multicast() || v4.is_broadcast() || a >= 240 {
                Some(SpecialAddress::Unroutable)
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some(SpecialAddress::Loopback)
            } else if first & 0xfe00 == 0xfc00 {
                Some(SpecialAddress::Private)
            } else if first & 0xffc0 == 0xfe80 {
                Some(SpecialAddress::LinkLocal)
            } else if v6.is_unspecified() || v6.is_multicast() {
                Some(SpecialAddress::Unroutable)
            } else {
                None
            }
        }
    }
}

impl NetRules {
    /// Decides a host as the program named it (a name or an address literal) and a port. `deny` wins;
    /// a host no `allow` rule matches is refused.
    pub fn decide(&self, host: &str, port: u16) -> NetDecision {
        let name = normalize_host(host.trim_start_matches('[').trim_end_matches(']'));
        if let Some(rule) = self.deny.iter().find(|r| r.matches_name(&name, port)) {
            return NetDecision::Deny {
                rule: Some(rule.to_string()),
                reason: format!("{name}:{port} is denied by net rule '{rule}'"),
            };
        }
        match self.allow.iter().find(|r| r.matches_name(&name, port)) {
            Some(rule) => NetDecision::Allow {
                rule: rule.to_string(),
            },
            None => NetDecision::Deny {
                rule: None,
                reason: format!(
                    "{name}:{port} is not in the network allowlist; add it with --net-allow {name} \
                     (or net.allow in the policy)"
                ),
            },
        }
    }

    /// Decides one address a host resolved to, after [`NetRules::decide`] allowed the host: a
    /// `special` address (loopback, private, link-local, unroutable, the host's own) is refused unless an
    /// `allow` rule names it; a `deny` rule naming the address refuses it too.
    pub fn decide_address(
        &self,
        host: &str,
        ip: IpAddr,
        port: u16,
        special: Option<SpecialAddress>,
    ) -> NetDecision {
        let ip = canonical_ip(ip);
        if let Some(rule) = self.deny.iter().find(|r| r.names_address(ip, port)) {
            return NetDecision::Deny {
                rule: Some(rule.to_string()),
                reason: format!("{host} resolves to {ip}, which net rule '{rule}' denies"),
            };
        }
        match special {
            None => NetDecision::Allow {
                rule: String::new(),
            },
            Some(kind) => match self.allow.iter().find(|r| r.names_address(ip, port)) {
                Some(rule) => NetDecision::Allow {
                    rule: rule.to_string(),
                },
                None => NetDecision::Deny {
                    rule: None,
                    reason: format!(
                        "{host} resolves to {ip}, {kind}; the proxy reaches such addresses only when \
                         net.allow names the address itself (--net-allow {ip})"
                    ),
                },
            },
        }
    }
}

/// The path prefix under which the proxy serves gateways: `/gateway/NAME/...`.
pub const GATEWAY_PATH: &str = "/gateway/";

/// One API gateway, resolved: where it leads and which headers it adds. The header values are not
/// here: the policy says where they come from ([`GatewayHeader`]); the supervisor reads them when a run
/// starts, and they never enter the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gateway {
    /// Its name: the path segment after `/gateway/`.
    pub name: String,
    /// The upstream host.
    pub host: String,
    /// The upstream port (443 unless the URL says otherwise).
    pub port: u16,
    /// The upstream base path, without a trailing `/` (empty for the root).
    pub base_path: String,
    /// Variables set inside to the local base URL.
    pub url_env: Vec<String>,
    /// Headers added to each request.
    pub headers: Vec<GatewayHeader>,
    /// Variables set inside to a placeholder key.
    pub placeholder_env: Vec<String>,
}

/// A header a gateway adds, and where its value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayHeader {
    /// The header name, lower case.
    pub name: String,
    /// The variable holding the secret.
    pub env: String,
    /// The `K=V` file to read it from instead of the supervisor's environment: absolute once the
    /// policy is resolved, and denied by an implicit rule in every layer.
    pub env_file: Option<std::path::PathBuf>,
    /// The value around the secret, `{}` where it goes.
    pub format: String,
}

impl Gateway {
    /// The base URL a program inside uses, on the proxy's port.
    pub fn local_url(&self, port: u16) -> String {
        format!("http://127.0.0.1:{port}{GATEWAY_PATH}{}", self.name)
    }

    /// Parses `https://host[:port][/path]` into a gateway named `name`.
    pub(crate) fn parse(
        name: &str,
        spec: &crate::file::GatewaySpec,
        expand: impl Fn(&str) -> Result<String, String>,
    ) -> Result<Self, PolicyError> {
        let location = format!("gateway '{name}'");
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(PolicyError::invalid(
                &location,
                "a gateway's name is one path segment",
                "name it with letters, digits, '-' and '_'",
            ));
        }
        let bad_url = |why: &str| {
            PolicyError::invalid(
                &location,
                format!("upstream '{}' {why}", spec.upstream),
                "write upstream = \"https://host[:port][/path]\"",
            )
        };
        let rest = spec
            .upstream
            .strip_prefix("https://")
            .ok_or_else(|| bad_url("is not an https:// URL (keys are sent only over TLS)"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') || path.contains(['?', '#']) {
            return Err(bad_url("has user info, a query or a fragment"));
        }
        let rule = HostRule::parse(authority).map_err(|_| bad_url("has no valid host"))?;
        let host = match &rule.host {
            HostPattern::Name(n) => n.clone(),
            HostPattern::Address(a) => a.to_string(),
            HostPattern::Subdomains(_) => return Err(bad_url("names a pattern, not a host")),
        };
        let mut headers = Vec::new();
        for (header, secret) in &spec.headers {
            let lower = header.to_ascii_lowercase();
            if lower.is_empty()
                || !lower
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            {
                return Err(PolicyError::invalid(
                    &location,
                    format!("'{header}' is not a header name"),
                    "use letters, digits and '-'",
                ));
            }
            let format = secret.format.clone().unwrap_or_else(|| "{}".into());
            if format.matches("{}").count() != 1 {
                return Err(PolicyError::invalid(
                    &location,
                    format!("the format of header '{header}' must hold exactly one {{}}"),
                    "write e.g. format = \"Bearer {}\"",
                ));
            }
            let env_file = secret
                .env_file
                .as_deref()
                .map(|f| expand(f).map(std::path::PathBuf::from))
                .transpose()
                .map_err(|m| PolicyError::invalid(&location, m, "fix env-file"))?;
            headers.push(GatewayHeader {
                name: lower,
                env: secret.env.clone(),
                env_file,
                format,
            });
        }
        Ok(Gateway {
            name: name.to_string(),
            host,
            port: rule.port.unwrap_or(443),
            base_path: path.trim_end_matches('/').to_string(),
            url_env: spec.url_env.clone(),
            headers,
            placeholder_env: spec.placeholder_env.clone(),
        })
    }
}
