//! Replicas on one real PostgreSQL database (a fresh database per test in the cluster
//! TOOLGATE_TEST_POSTGRES names; scripts/test.sh starts one).

use std::process::Command;

use super::Server;
use super::agents::FAST;

/// A database of its own in the test cluster; its URL.
pub fn fresh_database(name: &str) -> String {
    let base = std::env::var("TOOLGATE_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!("TOOLGATE_TEST_POSTGRES is not set: run the test under `bash scripts/with_postgres.sh cargo test`, which starts a throwaway cluster")
    });
    let database = format!("{name}_{}", std::process::id());
    let out = Command::new("psql").arg(&base).args(["-qc", &format!("CREATE DATABASE {database}")]).output().unwrap();
    assert!(out.status.success(), "CREATE DATABASE: {}", String::from_utf8_lossy(&out.stderr));
    let (server, _) = base.rsplit_once('/').unwrap();
    format!("{server}/{database}")
}

/// Replicas `a` and `b` on `database`; `a` starts first (and prints the demo token).
pub fn replicas(database: &str, extra: &[&str]) -> (Server, Server) {
    let with = |name: &'static str| {
        let mut args = vec!["--database", database, "--replica", name];
        args.extend_from_slice(FAST);
        args.extend_from_slice(extra);
        args
    };
    let a = super::start(&with("a"));
    let mut b = super::start(&with("b"));
    // Only the first start on a database prints the demo token: the same token on B.
    b.token = a.token.clone();
    (a, b)
}
