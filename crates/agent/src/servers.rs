//! The servers an agent may talk to: the replicas of one deployment (they share one database,
//! so its identity is good on each). It uses one at a time and moves to the next when that one
//! cannot be reached; uploads follow.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::AgentError;
use crate::tls::{Endpoint, ServerTrust};

pub struct Servers {
    endpoints: Vec<Endpoint>,
    current: AtomicUsize,
}

impl Servers {
    /// At least one URL; each is checked (and its TLS set up) now. Over TLS each presents the
    /// client certificate kept in `state_dir`, if any.
    pub fn new(urls: &[String], trust: &ServerTrust, state_dir: Option<&Path>) -> Result<Self, AgentError> {
        if urls.is_empty() {
            return Err(AgentError::BadServerUrl(String::new()));
        }
        let endpoints = urls.iter().map(|url| Endpoint::new(url, trust, state_dir)).collect::<Result<_, _>>()?;
        Ok(Self { endpoints, current: AtomicUsize::new(0) })
    }

    /// The server in use.
    pub fn current(&self) -> &Endpoint {
        &self.endpoints[self.current.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    /// `failed` could not be reached: the next one is used from now on (unless another task
    /// moved on already). True when that starts a new round over every server.
    pub fn advance(&self, failed: &Endpoint) -> bool {
        let at = self.current.load(Ordering::Relaxed);
        if self.endpoints[at % self.endpoints.len()].url != failed.url {
            return false;
        }
        let next = (at + 1) % self.endpoints.len();
        let _ = self.current.compare_exchange(at, next, Ordering::Relaxed, Ordering::Relaxed);
        next == 0
    }

    /// Whether there is more than one (replicas).
    pub fn several(&self) -> bool {
        self.endpoints.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_moves_on_round_the_servers() {
        let urls = ["http://a:1".to_string(), "http://b:2".to_string()];
        let servers = Servers::new(&urls, &ServerTrust::System, None).unwrap();
        let a = servers.current().clone();
        assert!(a.url.contains("a:1"));
        assert!(!servers.advance(&a), "b is next, same round");
        assert!(servers.current().url.contains("b:2"));
        assert!(!servers.advance(&a), "a failure seen late does not skip b");
        let b = servers.current().clone();
        assert!(servers.advance(&b), "back to a: a new round");
        assert!(Servers::new(&[], &ServerTrust::System, None).is_err());
        assert!(Servers::new(&["ftp://x".to_string()], &ServerTrust::System, None).is_err());
    }
}
