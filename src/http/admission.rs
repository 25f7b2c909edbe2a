//! Which connections are let in before they authenticate. Each holds a place until one of its
//! requests authenticates ([`Connection::authenticated`]) or it closes:
//!
//! - at most `max_unauthenticated` in all, and at most `max_unauthenticated_per_address` from
//!   one source address, so that one host's idle sockets cannot lock everyone out;
//! - past the general cap, a small reserve (`reserved`) still takes connections for what must
//!   keep working under such a flood: `/healthz` and `/readyz` (the operator's probes) and the
//!   agent endpoint (agents authenticate in their first frame, under caps of their own). A
//!   reserved connection asking for anything else is answered 503 and closed; its request
//!   head must arrive within [`RESERVE_HEADER_READ`].
//!
//! Past the reserve, or the per-address cap, a new connection is closed at once.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a connection let in through the reserve may take to send its request head.
pub const RESERVE_HEADER_READ: Duration = Duration::from_secs(5);

/// The paths a connection let in through the reserve may ask for.
pub fn allowed_in_reserve(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz") || path == toolgate_domain::fleet::wire::AGENT_PATH
}

/// The caps, and who holds a place now.
pub struct Admission {
    general: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    per_address: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max_per_address: usize,
}

/// A connection's place: given back when the connection authenticates or closes.
#[derive(Debug)]
struct Place {
    _permit: OwnedSemaphorePermit,
    address: IpAddr,
    per_address: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.per_address.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

impl Admission {
    pub fn new(max_total: usize, max_per_address: usize, reserved: usize) -> Self {
        Self {
            general: Arc::new(Semaphore::new(max_total)),
            reserve: Arc::new(Semaphore::new(reserved)),
            per_address: Arc::default(),
            max_per_address: max_per_address.max(1),
        }
    }

    /// A place for a new connection from `peer`, or None: close it.
    pub fn admit(&self, peer: SocketAddr) -> Option<Connection> {
        let address = peer.ip();
        let mut counts = self.per_address.lock().unwrap_or_else(|e| e.into_inner());
        let count = counts.entry(address).or_default();
        if *count >= self.max_per_address {
            return None;
        }
        let (permit, reserved) = match self.general.clone().try_acquire_owned() {
            Ok(permit) => (permit, false),
            Err(_) => (self.reserve.clone().try_acquire_owned().ok()?, true),
        };
        *count += 1;
        drop(counts);
        let place = Place { _permit: permit, address, per_address: self.per_address.clone() };
        Some(Connection { peer: Some(peer), reserved, over_tls: false, place: Some(Arc::new(Mutex::new(Some(place)))) })
    }
}

/// Where a request came from: its peer, and its connection's place among the unauthenticated
/// ones, given up when a request on it authenticates. Requests the router serves carry it as
/// an extension; the MCP endpoint is handed it (see `listener::serve`).
#[derive(Clone, Debug, Default)]
pub struct Connection {
    pub peer: Option<SocketAddr>,
    /// Let in through the reserve: only [`allowed_in_reserve`] paths are served.
    pub reserved: bool,
    /// It came over TLS (plugin secrets go to an agent only on such a connection).
    pub over_tls: bool,
    place: Option<Arc<Mutex<Option<Place>>>>,
}

impl Connection {
    /// The connection of a request the router serves (none in in-process tests).
    pub fn of(extensions: &axum::http::Extensions) -> Self {
        extensions.get::<Self>().cloned().unwrap_or_default()
    }

    pub fn authenticated(&self) {
        if let Some(place) = &self.place {
            place.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(ip: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((ip, port))
    }

    #[test]
    fn one_address_cannot_take_every_place_and_the_reserve_outlasts_a_flood() {
        let admission = Admission::new(4, 3, 1);
        let flood: Vec<Connection> = (0..3).filter_map(|p| admission.admit(from([10, 0, 0, 1], p))).collect();
        assert_eq!(flood.len(), 3);
        assert!(admission.admit(from([10, 0, 0, 1], 9)).is_none(), "past the per-address cap");
        let other = admission.admit(from([10, 0, 0, 2], 1)).expect("another address gets the last general place");
        assert!(!other.reserved);
        let probe = admission.admit(from([10, 0, 0, 3], 1)).expect("the reserve");
        assert!(probe.reserved);
        assert!(admission.admit(from([10, 0, 0, 4], 1)).is_none(), "past the reserve");
        // Authenticating gives the place back (and the address's count).
        flood[0].authenticated();
        let again = admission.admit(from([10, 0, 0, 1], 10)).expect("a place again, for that address too");
        assert!(!again.reserved);
        drop(flood);
        assert!(admission.admit(from([10, 0, 0, 1], 11)).is_some());
        assert!(allowed_in_reserve("/healthz") && allowed_in_reserve("/agent/v1") && !allowed_in_reserve("/mcp"));
    }
}
