//! What agents trust and how they are known (docs/trust.md): the agent CA, sealed under the
//! key-encryption key and shared by replicas, and the certificates it issues from requests
//! the agents make with keys of their own.

pub mod ca;
pub mod issuer;
pub mod mutual_tls;
