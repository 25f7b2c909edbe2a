//! The fleet's shared vocabulary: what an agent is ([`agent`]), what it says to the server and
//! hears back ([`wire`]), the inventory tables it reports ([`inventory`]), how software
//! versions compare ([`version`]), the scope language that chooses agents ([`scope`]), the
//! instructions agents run ([`instruction`]) and the compliance rules they check ([`compliance`]).
//! The agent process and the server both speak these types; neither owns them.

pub mod agent;
pub mod compare;
pub mod compliance;
pub mod experience;
pub mod instruction;
mod instruction_docs;
pub mod inventory;
pub mod parts;
pub mod quarantine;
pub mod rank_test;
pub mod rollout;
pub mod run_order;
pub mod scope;
pub mod signals;
pub mod signing;
pub mod version;
pub mod wire;

pub use agent::{AgentStatus, AgentSummary, Disk, EnrollRefusal, EnrollmentToken, HostFacts};
