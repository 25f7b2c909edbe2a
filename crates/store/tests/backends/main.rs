//! One store test suite, run against every backend: the embedded SQLite file and PostgreSQL
//! (a fresh schema per test in the database `TOOLGATE_TEST_POSTGRES` names; scripts/test.sh
//! starts a throwaway cluster for it with scripts/with_postgres.sh).
//!
//! Each test is written once, against [`Repositories`] (the traits the server uses), and the
//! `matrix!` macro runs it on each backend.

mod approvals;
mod audit_tags_config;
mod certs;
mod credentials;
mod engines;
mod experience;
mod federated;
mod fleet;
mod fleet_work;
mod groups;
mod plugin_secrets;
mod responses;
mod reviews;
mod rollouts;
mod uploads;

use std::sync::atomic::{AtomicUsize, Ordering};

use toolgate_store::{PostgresStore, Repositories, SqliteStore};

/// Runs `$test(repositories)` once per backend: `$test::sqlite` and `$test::postgres`.
#[macro_export]
macro_rules! matrix {
    ($($test:ident),+ $(,)?) => {
        $(
            mod $test {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$test($crate::sqlite().await).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$test($crate::postgres().await).await
                }
            }
        )+
    };
}

pub async fn sqlite() -> Repositories {
    SqliteStore::open_in_memory().expect("an in-memory SQLite store").repositories()
}

/// The PostgreSQL URL the suite runs against.
pub fn postgres_url() -> String {
    std::env::var("TOOLGATE_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "TOOLGATE_TEST_POSTGRES is not set: the store suite runs on PostgreSQL too. Run it as \
             `bash scripts/with_postgres.sh cargo test -p toolgate-store` (scripts/test.sh does), or point \
             TOOLGATE_TEST_POSTGRES at a database you may fill"
        )
    })
}

/// A fresh schema of its own, so that tests running at once never see each other's rows: the
/// connection configuration that uses it, and its name.
pub async fn postgres_schema() -> (tokio_postgres::Config, String) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let schema = format!("t{}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed), rand_suffix());
    sql(&format!("CREATE SCHEMA {schema}")).await;
    let mut config: tokio_postgres::Config =
        postgres_url().parse().expect("TOOLGATE_TEST_POSTGRES is a PostgreSQL URL");
    config.options(format!("-c search_path={schema}"));
    (config, schema)
}

/// Runs SQL on the test database, outside any store.
pub async fn sql(text: &str) {
    let (client, connection) =
        tokio_postgres::connect(&postgres_url(), tokio_postgres::NoTls).await.expect("connect to the test database");
    let task = tokio::spawn(connection);
    client.batch_execute(text).await.unwrap_or_else(|e| panic!("{text}: {e}"));
    drop(client);
    let _ = task.await;
}

pub async fn postgres_store() -> PostgresStore {
    PostgresStore::connect_with(postgres_schema().await.0, "test-replica").await.expect("connect the store")
}

pub async fn postgres() -> Repositories {
    postgres_store().await.repositories()
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0)
}

/// Replicas starting together migrate once (under the advisory lock); a database whose schema
/// is newer than this binary is refused with a sentence saying what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_migrations_run_once_and_refuse_a_newer_schema() {
    let (config, schema) = postgres_schema().await;
    let (a, b) = tokio::join!(
        PostgresStore::connect_with(config.clone(), "a"),
        PostgresStore::connect_with(config.clone(), "b")
    );
    a.unwrap().repositories().health.check_ready(1).await.unwrap();
    b.unwrap();
    sql(&format!("UPDATE {schema}.toolgate_schema SET version = 99")).await;
    let connect = || PostgresStore::connect_with(config.clone(), "c");
    let refused = connect().await.unwrap_err().to_string();
    assert!(refused.contains("newer than this binary") && refused.contains("upgrade toolgate"), "{refused}");
    let bad = PostgresStore::connect("mysql://nope", "x").await.unwrap_err().to_string();
    assert!(bad.contains("postgres://user:password@host:port/database"), "{bad}");
}

/// Two replicas on one database: what one changes, the other hears (and not its own changes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_hear_each_others_changes() {
    use toolgate_domain::tokens::NewToken;
    use toolgate_store::{Change, NewExecution};
    let (config, _) = postgres_schema().await;
    let a = PostgresStore::connect_with(config.clone(), "a").await.unwrap().repositories();
    let b = PostgresStore::connect_with(config, "b").await.unwrap().repositories();
    let feed = |r: &Repositories| r.shared.as_ref().unwrap().changes.subscribe();
    let (mut heard_by_a, mut heard_by_b) = (feed(&a), feed(&b));
    // LISTEN runs on a connection of its own: probe until a hears b (however long a loaded
    // machine takes to open it), then run the script. A late probe is skipped below.
    let is_probe = |c: &Change| matches!(c, Change::Quarantine(id) if id.starts_with("agt-probe"));
    'listening: for n in 0.. {
        b.work.set_quarantine(&format!("agt-probe-{n}"), false, None).await.unwrap();
        let wait = tokio::time::sleep(std::time::Duration::from_millis(200));
        tokio::pin!(wait);
        loop {
            tokio::select! {
                heard = heard_by_a.recv() => if is_probe(&heard.unwrap()) { break 'listening },
                _ = &mut wait => break,
            }
        }
        assert!(n < 300, "replica a never heard b");
    }
    while heard_by_b.try_recv().is_ok() {}
    b.credentials.put_principal("alice", &["Viewer".into()], 0).await.unwrap();
    let new = NewToken { principal: "alice", tier: None, name: "t", now: 0, expires_at: 100, toolsets: None };
    let (token, _) = b.credentials.create_token(new).await.unwrap();
    b.credentials.revoke_token(&token.id, 1).await.unwrap();
    let (_, secret) = b.fleet.create_enrollment_token(i64::MAX, 1, 0).await.unwrap();
    let (agent, _) = b.fleet.enroll(&secret, 0).await.unwrap().unwrap();
    let execution = NewExecution {
        execution_id: "exe-1".into(),
        kind: "instruction".into(),
        steps: Vec::new(),
        scope: None,
        requested_by: "alice".into(),
        created_at_ms: 0,
        deadline_ms: 10,
        targets: vec![agent.clone()],
        idempotency: None,
        rollout: None,
    };
    b.work.create_execution(execution).await.unwrap();
    b.work.set_quarantine(&agent, true, None).await.unwrap();
    b.fleet.revoke_agent(&agent, 2).await.unwrap();
    let expected = [
        Change::Credentials,
        Change::Credentials,
        Change::AgentEnrolled(agent.clone()),
        Change::ExecutionCreated("exe-1".into()),
        Change::Quarantine(agent.clone()),
        Change::AgentRevoked(agent.clone()),
    ];
    for want in expected {
        let got = loop {
            let got = tokio::time::timeout(std::time::Duration::from_secs(10), heard_by_a.recv())
                .await
                .expect("heard in time")
                .unwrap();
            if !is_probe(&got) {
                break got;
            }
        };
        assert_eq!(got, want);
    }
    assert!(heard_by_b.try_recv().is_err(), "a replica does not hear its own changes");
}

/// What replicas share besides records: a secret made once, single-use marks, sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_share_secrets_single_use_marks_and_sessions() {
    use toolgate_store::SessionRecord;
    let (config, _) = postgres_schema().await;
    let a = PostgresStore::connect_with(config.clone(), "a").await.unwrap().repositories();
    let b = PostgresStore::connect_with(config, "b").await.unwrap().repositories();
    let (a, b) = (a.shared.unwrap().state, b.shared.unwrap().state);
    let (first, second) = tokio::join!(a.shared_secret("key", b"from-a"), b.shared_secret("key", b"from-b"));
    assert_eq!(first.unwrap(), second.unwrap(), "one secret, whoever asked first");
    assert!(a.use_once("nonce-1", 100, 10).await.unwrap());
    assert!(!b.use_once("nonce-1", 100, 10).await.unwrap(), "used once, on any replica");
    assert!(b.use_once("nonce-1", 200, 100).await.unwrap(), "forgotten once expired");
    let session = SessionRecord {
        id: "tgs-1".into(),
        principal: "alice".into(),
        version: "2025-11-25".into(),
        client_capabilities: "{}".into(),
        last_seen_ms: 1_000,
        replica: "a".into(),
    };
    a.put_session(&session, 0).await.unwrap();
    assert_eq!(b.session("tgs-1").await.unwrap(), Some(session.clone()));
    b.touch_session("tgs-1", 2_000).await.unwrap();
    b.touch_session("tgs-1", 1_500).await.unwrap();
    assert_eq!(a.session("tgs-1").await.unwrap().unwrap().last_seen_ms, 2_000, "never moves back");
    assert!(b.remove_session("tgs-1").await.unwrap());
    assert!(!a.remove_session("tgs-1").await.unwrap());
    a.put_session(&SessionRecord { id: "tgs-2".into(), ..session.clone() }, 0).await.unwrap();
    a.put_session(&SessionRecord { id: "tgs-3".into(), last_seen_ms: 5_000, ..session }, 2_000).await.unwrap();
    assert!(b.session("tgs-2").await.unwrap().is_none(), "idle sessions are forgotten");
}
