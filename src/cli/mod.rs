//! The console commands: [`author`] (`check`, `explain`, `tools list`: the generator's own
//! rules and tables, for people who write the catalogue) and [`console`] (tokens, principals,
//! approvals: the store, for whoever runs the server).

pub mod author;
pub mod ca;
pub mod console;
mod declared;
pub mod engines;
pub mod fleet;
pub mod groups;
pub mod kek;
pub mod serve;
pub mod tokens;
mod toolsets;

pub use author::CatalogueFiles;
pub use serve::ServeArgs;
