//! A proxy's settings from a resolved policy: its rules, its gateways with the keys they add (read now,
//! from the supervisor's environment or an env file), and the names `$STOCKADE_NET_HOSTS` pins. Shared by
//! every runner that serves a sandbox's network (`stockade run`, the quarantine's reader).

use std::path::{Path, PathBuf};

use stockade_policy::{Gateway, ResolvedPolicy};

use crate::{GatewayRoute, Proxy, ProxyConfig, system_roots};

/// Why a proxy could not be set up; each message names what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The host's interface addresses (refused as destinations) could not be read.
    #[error("cannot read this host's interface addresses for the network proxy: {0}")]
    Interfaces(std::io::Error),
    /// A gateway's key is missing, empty, unusable, or would also be passed inside.
    #[error("{0}")]
    Gateway(String),
    /// The trust roots for the gateways' upstreams could not be loaded.
    #[error(
        "cannot load the trust roots the gateways verify their upstreams with ({}): {source}",
        bundle.display()
    )]
    Roots {
        /// The PEM bundle read.
        bundle: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// `$STOCKADE_NET_HOSTS` could not be read or has a bad line.
    #[error("$STOCKADE_NET_HOSTS '{}': {reason}", path.display())]
    Hosts {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// The proxy for `policy`, or `None` when its network is not served by one (`net = "all"`).
pub fn proxy_config_for(policy: &ResolvedPolicy) -> Result<Option<ProxyConfig>, SetupError> {
    let Some(rules) = policy.net().rules() else {
        return Ok(None);
    };
    let mut config = ProxyConfig::new(rules.clone()).map_err(SetupError::Interfaces)?;
    if !policy.gateways().is_empty() {
        let mut routes = Vec::new();
        for gateway in policy.gateways() {
            let secrets = gateway_secrets(gateway, policy)?;
            routes.push(GatewayRoute::new(gateway.clone(), &secrets).map_err(SetupError::Gateway)?);
        }
        let bundle = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
        let roots = system_roots(bundle.as_deref()).map_err(|source| SetupError::Roots {
            bundle: bundle.unwrap_or_else(|| PathBuf::from(crate::gateway::SYSTEM_BUNDLE)),
            source,
        })?;
        config = config
            .with_gateways(routes, roots)
            .map_err(|e| SetupError::Gateway(e.to_string()))?;
    }
    if let Some(path) = std::env::var_os("STOCKADE_NET_HOSTS") {
        let path = PathBuf::from(path);
        let text = std::fs::read_to_string(&path).map_err(|e| SetupError::Hosts {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if let Some(line) = config.resolver.pin_hosts_text(&text).first() {
            return Err(SetupError::Hosts {
                path,
                reason: format!("'{line}' is not 'ADDRESS NAME...'"),
            });
        }
    }
    Ok(Some(config))
}

/// Reads each header value of a gateway once, now. A value that would also be passed into the sandbox
/// is refused: the point is that it is not there.
fn gateway_secrets(gateway: &Gateway, policy: &ResolvedPolicy) -> Result<Vec<String>, SetupError> {
    let fail = |message: String| SetupError::Gateway(message);
    let mut values = Vec::new();
    for header in &gateway.headers {
        if header.env_file.is_none() && policy.env().pass.contains(&header.env) {
            return Err(fail(format!(
                "gateway '{}' adds ${} as header '{}', but the profile also passes ${} into the sandbox; \
                 remove it from env.pass (the gateway exists so that the key stays outside)",
                gateway.name, header.env, header.name, header.env
            )));
        }
        let value = match &header.env_file {
            Some(file) => env_file_value(file, &header.env).map_err(|reason| {
                fail(format!("gateway '{}': '{}' {reason}", gateway.name, file.display()))
            })?,
            None => std::env::var(&header.env).map_err(|_| {
                fail(format!(
                    "gateway '{}' takes header '{}' from ${}, which is not set; export it where you run \
                     stockade (it stays outside the sandbox), or name a file with env-file",
                    gateway.name, header.name, header.env
                ))
            })?,
        };
        if value.is_empty() {
            return Err(fail(format!(
                "gateway '{}': ${} is empty; header '{}' would carry no key",
                gateway.name, header.env, header.name
            )));
        }
        values.push(value);
    }
    Ok(values)
}

fn env_file_value(file: &Path, name: &str) -> Result<String, String> {
    stockade_policy::read_env_file(file)
        .map_err(|e| format!("cannot be read: {e}"))?
        .into_iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .ok_or_else(|| format!("has no line {name}=..."))
}

/// Serves a started sandbox's network: takes its proxy listener and starts a [`Proxy`] on it with
/// `config` (from [`proxy_config_for`]); no proxy when the sandbox's network has none. Call it only
/// after `spawn`: the sandbox's init is a fork of this process, which must have had one thread. If the
/// proxy cannot start, the sandbox is killed and reaped (a program that depends on its network must not
/// run without it) and the error returned.
pub fn serve_sandbox(
    mut running: stockade_sandbox::RunningSandbox,
    config: Option<ProxyConfig>,
) -> std::io::Result<(stockade_sandbox::RunningSandbox, Option<Proxy>)> {
    let (Some(listener), Some(config)) = (running.take_proxy_listener(), config) else {
        return Ok((running, None));
    };
    match Proxy::start(move || listener.receive(), config) {
        Ok(proxy) => Ok((running, Some(proxy))),
        Err(e) => {
            running.kill();
            let _ = running.wait();
            Err(e)
        }
    }
}
