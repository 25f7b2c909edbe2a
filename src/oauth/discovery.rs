//! An authorization server's metadata: where its keys, its introspection endpoint and (for the
//! console) its authorization and token endpoints are. Read from OpenID Connect discovery
//! (`ISSUER/.well-known/openid-configuration`), else RFC 8414's
//! (`/.well-known/oauth-authorization-server` inserted before the issuer's path). The document
//! must name the issuer exactly as configured (a mix-up defence). Kept once read; a failure is
//! remembered for a short while, so an issuer that is down costs one call per interval, not one
//! per request.

use std::sync::{Arc, Mutex};

use serde::Deserialize;
use toolgate_domain::Clock;

use crate::outbound::Outbound;

/// The largest metadata document read, in bytes.
const MAX_METADATA_BYTES: u64 = 64 * 1024;
/// How long a failed discovery is answered from memory before it is tried again.
const RETRY_AFTER_MS: i64 = 10_000;

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct IssuerMetadata {
    pub issuer: String,
    #[serde(default)]
    pub jwks_uri: Option<String>,
    #[serde(default)]
    pub introspection_endpoint: Option<String>,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    #[serde(default)]
    pub token_endpoint: Option<String>,
    #[serde(default)]
    pub userinfo_endpoint: Option<String>,
}

/// The two places metadata may be, in the order tried.
pub fn metadata_urls(issuer: &str) -> [String; 2] {
    let trimmed = issuer.trim_end_matches('/');
    let oidc = format!("{trimmed}/.well-known/openid-configuration");
    // RFC 8414 §3.1: the well-known segment goes between the host and the issuer's path.
    let rfc8414 = match url::Url::parse(trimmed) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!("{}/.well-known/oauth-authorization-server{path}", url.origin().ascii_serialization())
        }
        Err(_) => format!("{trimmed}/.well-known/oauth-authorization-server"),
    };
    [oidc, rfc8414]
}

enum Known {
    Read(Arc<IssuerMetadata>),
    Failed { at_ms: i64, why: String },
}

pub struct Discovery {
    issuer: String,
    outbound: Outbound,
    clock: Clock,
    known: Mutex<Option<Known>>,
    fetching: tokio::sync::Mutex<()>,
}

impl Discovery {
    pub fn new(issuer: impl Into<String>, outbound: Outbound, clock: Clock) -> Self {
        Discovery { issuer: issuer.into(), outbound, clock, known: Mutex::default(), fetching: Default::default() }
    }

    fn remembered(&self) -> Option<Result<Arc<IssuerMetadata>, String>> {
        match &*self.known.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(Known::Read(m)) => Some(Ok(m.clone())),
            Some(Known::Failed { at_ms, why }) if self.clock.now_ms() - at_ms < RETRY_AFTER_MS => {
                Some(Err(why.clone()))
            }
            _ => None,
        }
    }

    /// The metadata, read once; `Err` says why it cannot be had (the caller answers 503).
    pub async fn metadata(&self) -> Result<Arc<IssuerMetadata>, String> {
        if let Some(known) = self.remembered() {
            return known;
        }
        let _one_at_a_time = self.fetching.lock().await;
        if let Some(known) = self.remembered() {
            return known;
        }
        let read = self.read().await;
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match &read {
            Ok(m) => *known = Some(Known::Read(m.clone())),
            Err(why) => *known = Some(Known::Failed { at_ms: self.clock.now_ms(), why: why.clone() }),
        }
        read
    }

    async fn read(&self) -> Result<Arc<IssuerMetadata>, String> {
        let mut tried = Vec::new();
        for url in metadata_urls(&self.issuer) {
            let body = match self.outbound.get(&url, MAX_METADATA_BYTES).await {
                Ok(body) => body,
                Err(e) => {
                    tried.push(e.to_string());
                    continue;
                }
            };
            let metadata: IssuerMetadata = serde_json::from_slice(&body)
                .map_err(|e| format!("{url} is not authorization server metadata: {e}"))?;
            if metadata.issuer != self.issuer {
                return Err(format!(
                    "{url} names the issuer `{}`, not `{}` as configured: refusing it",
                    metadata.issuer, self.issuer
                ));
            }
            return Ok(Arc::new(metadata));
        }
        Err(format!("no metadata for issuer {}: {}", self.issuer, tried.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn metadata_is_looked_for_where_oidc_and_rfc_8414_put_it() {
        assert_eq!(
            super::metadata_urls("https://idp.example/realms/fleet"),
            [
                "https://idp.example/realms/fleet/.well-known/openid-configuration".to_string(),
                "https://idp.example/.well-known/oauth-authorization-server/realms/fleet".to_string(),
            ]
        );
        assert_eq!(
            super::metadata_urls("https://idp.example/")[1],
            "https://idp.example/.well-known/oauth-authorization-server"
        );
    }
}
