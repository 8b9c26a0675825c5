//! Name resolution by the proxy itself, and the addresses it treats as special.
//!
//! The program never resolves a name that leaves the sandbox (it has no route to any resolver): it hands
//! the name to the proxy, which resolves it here, judges every address it got, and connects to an address
//! it judged. There is no second lookup between the check and the connect, so a name that changes its
//! answer (DNS rebinding) cannot slip a loopback address past the check.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::IpAddr;

use stockade_policy::{SpecialAddress, canonical_ip, normalize_host, special_address};

/// Resolves names for the proxy: pinned names first, then the system's resolver.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    pinned: HashMap<String, Vec<IpAddr>>,
    host_addresses: HashSet<IpAddr>,
}

impl Resolver {
    /// A resolver that knows this host's interface addresses (read now).
    pub fn new() -> io::Result<Self> {
        let host_addresses = crate::sys::host_addresses()?
            .into_iter()
            .map(canonical_ip)
            .collect();
        Ok(Resolver {
            pinned: HashMap::new(),
            host_addresses,
        })
    }

    /// Pins names to addresses from text in the format of `/etc/hosts` (`ADDRESS NAME...`, `#` comments),
    /// answered before the system resolver is asked. For names a user wants fixed (like curl's
    /// `--resolve`) and for tests that need names they control. Returns how many lines it could not read.
    pub fn pin_hosts_text(&mut self, text: &str) -> Vec<String> {
        let mut bad = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let Some(Ok(ip)) = words.next().map(str::parse::<IpAddr>) else {
                bad.push(line.to_string());
                continue;
            };
            for name in words {
                self.pinned
                    .entry(normalize_host(name))
                    .or_default()
                    .push(ip);
            }
        }
        bad
    }

    /// The addresses of `host` (a name or an address literal, `[v6]` allowed).
    pub async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        if let Some(pinned) = self.pinned.get(&normalize_host(bare)) {
            return Ok(pinned.clone());
        }
        let mut out = Vec::new();
        for addr in tokio::net::lookup_host((bare, port)).await? {
            if !out.contains(&addr.ip()) {
                out.push(addr.ip());
            }
        }
        Ok(out)
    }

    /// What kind of special address this is, if any: its range, or one of this host's own.
    pub fn classify(&self, ip: IpAddr) -> Option<SpecialAddress> {
        special_address(ip).or_else(|| {
            self.host_addresses
                .contains(&canonical_ip(ip))
                .then_some(SpecialAddress::Host)
        })
    }
}
