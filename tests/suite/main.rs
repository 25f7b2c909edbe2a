//! The server's integration tests, one binary: every file here is a module of it, so the
//! server library is linked once rather than once per file, and the tests of all files share
//! the test threads (`cargo test --workspace --test suite <file>::` runs one file).
//! `snapshots` and `layering` stay binaries of their own: the first is what authors re-run to
//! bless, the second reads only Cargo.toml and builds against any catalogue
//! (scripts/suite_build.sh).

mod access_reviews;
mod agent_frames;
mod apps;
mod buffering_proxy;
mod changes;
mod common;
mod reboots;
mod waves;

mod catalogue_crosscheck;
mod confirm;
mod console;
mod cors;
mod cross_principal;
mod decision_table;
mod engines;
mod executions;
mod experience;
mod fidelity;
mod fleet;
mod fleet_hardening;
mod gate;
mod group_reviewers;
mod group_tools;
mod groups;
mod handlers;
mod hardening;
mod listening;
mod module_graph;
mod mutual_tls;
mod network;
mod oauth;
mod operations;
mod packages;
mod paging;
mod prompts_resources;
mod quarantine;
mod reference;
mod reference_calls;
mod replicas;
mod resume;
mod router_faults;
mod runbook;
mod secrets;
mod server_http;
mod server_protocol;
mod signed_frames;
mod streaming;
mod tasks;
mod testbed;
mod testbed_apps;
mod testbed_experience;
mod testbed_reads;
mod tls;
mod tokens_api;
mod toolsets;
mod trust;
mod uploads;
