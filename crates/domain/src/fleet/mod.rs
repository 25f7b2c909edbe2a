//! The fleet's shared vocabulary: what an agent is ([`agent`]), what it says to the server and
//! hears back ([`wire`]), the inventory tables it reports ([`inventory`]), how software
//! versions compare ([`version`]) and the scope language that chooses agents ([`scope`]).
//! The agent process and the server both speak these types; neither owns them.

pub mod agent;
pub mod compare;
pub mod inventory;
pub mod scope;
pub mod version;
pub mod wire;

pub use agent::{AgentStatus, AgentSummary, Disk, EnrollRefusal, EnrollmentToken, HostFacts};
