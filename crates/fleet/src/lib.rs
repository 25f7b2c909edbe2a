//! The fleet hub: which agents exist, which are connected right now, and what they reported.
//!
//! Agents are rows first (the store), then live connections (here, in memory): a server restart
//! loses no agent, and each reconnecting agent is online again at its first message. The hub
//! knows no HTTP or WebSocket; the edge hands it the frames ([`session`]).

mod certs;
mod config;
mod connections;
mod delivery;
#[cfg(test)]
mod delivery_tests;
mod experience;
mod experience_views;
mod hub;
#[cfg(test)]
mod hub_tests;
mod kill;
mod plans;
pub mod query;
mod replicas;
mod reports;
mod results;
mod secrets;
pub mod session;
mod settings;
mod signing;
mod sweep;
mod updates;
pub mod uploads;
mod view;
mod visits;
mod waves;

pub use certs::{CertificateIssuer, CertificateReason, PeerCertificate, PresentedCertificate};
pub use delivery::RuleSet;
pub use experience_views::{DeviceView, VIEW_HOURS, VIEW_RAW_MS, VIEWS_MADE, day_since};
pub use hub::{Hub, Kick, Link};
pub use plans::{NO_APPROVED_PLAN, TOO_OLD_TO_PLAN};
pub use reports::{MAX_REPORTS_PER_AGENT, MAX_WAITING_REPORTS, REPORT_QUEUE_WAIT, ReportPlace, ReportRefusal};
pub use secrets::{NOT_OVER_TLS, SecretDelivery, SecretSource};
pub use settings::FleetSettings;
pub use signing::FrameSigning;
pub use uploads::{Receiving, UploadDesk, UploadError};
pub use view::{AgentView, GroupIndex, Labels, TagIndex};
