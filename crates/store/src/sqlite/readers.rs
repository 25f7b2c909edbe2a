//! Read-only connections beside the writer. SQLite in WAL mode lets a reader go on while a
//! transaction is being written, but one connection serves one caller at a time: with every
//! request on the writer's connection, a fleet read at 10,000 devices waited behind the
//! agents' reports and their commits (docs/experience.md, "At scale"). Reads that may run on a
//! snapshot as of their start (each sees every transaction committed before it began) go to
//! these instead; a store in memory has none and reads on its one connection.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::{Connection, OpenFlags};
use toolgate_domain::StoreError;

use super::{db, poisoned};

/// How many reads may run at once beside the writer: this server's machines have two cores.
const READERS: usize = 2;

#[derive(Debug)]
pub(super) struct Readers {
    connections: Vec<Mutex<Connection>>,
    /// The connection a read waits for when every one is busy (round robin).
    next: AtomicUsize,
}

impl Readers {
    /// Opens the readers of the database at `path` (already created and migrated).
    pub(super) fn open(path: &Path) -> Result<Readers, StoreError> {
        let connections = (0..READERS)
            .map(|_| {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(path, flags).map_err(db)?;
                conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(db)?;
                Ok(Mutex::new(conn))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Readers { connections, next: AtomicUsize::new(0) })
    }

    /// Runs `work` on a free reader, or waits for one.
    pub(super) fn with<T>(&self, work: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let free = self.connections.iter().find_map(|c| c.try_lock().ok());
        let mut guard = match free {
            Some(guard) => guard,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
                self.connections[i].lock().map_err(|_| poisoned())?
            }
        };
        work(&mut guard).map_err(db)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::super::SqliteStore;

    /// A new store in a file of its own (readers need a file), and the directory to remove.
    fn file_store(test: &str) -> (std::path::PathBuf, SqliteStore) {
        let dir = std::env::temp_dir().join(format!("toolgate-readers-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::open(&dir.join("readers.sqlite3")).unwrap();
        (dir, store)
    }

    fn checked_at(c: &mut rusqlite::Connection) -> rusqlite::Result<Option<i64>> {
        use rusqlite::OptionalExtension;
        c.query_row("SELECT checked_at_ms FROM readiness WHERE id = 1", [], |r| r.get(0)).optional()
    }

    /// A read goes on while the writer is in the middle of a transaction (it used to wait for
    /// the connection), sees what was committed before it began, and nothing uncommitted.
    #[tokio::test]
    async fn a_read_goes_on_beside_a_write_and_sees_only_what_was_committed() {
        let (dir, store) = file_store("beside");
        store
            .run(|c| c.execute("INSERT INTO readiness (id, checked_at_ms) VALUES (1, 1)", []).map(drop))
            .await
            .unwrap();

        let (written, wait_for_written) = mpsc::channel();
        let (commit, wait_for_commit) = mpsc::channel::<()>();
        let writer = store.conn.clone();
        let holding = std::thread::spawn(move || {
            let mut conn = writer.lock().unwrap();
            let tx = conn.transaction().unwrap();
            tx.execute("UPDATE readiness SET checked_at_ms = 2", []).unwrap();
            written.send(()).unwrap();
            wait_for_commit.recv().unwrap();
            tx.commit().unwrap();
        });
        wait_for_written.recv().unwrap();
        // The writer's connection is held, its transaction open: the read answers regardless.
        assert_eq!(store.read(checked_at).await.unwrap(), Some(1));
        commit.send(()).unwrap();
        holding.join().unwrap();
        assert_eq!(store.read(checked_at).await.unwrap(), Some(2));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store in memory has no readers: its reads are on its one connection.
    #[tokio::test]
    async fn a_store_in_memory_reads_on_its_connection() {
        let store = SqliteStore::open_in_memory().unwrap();
        store
            .run(|c| c.execute("INSERT INTO readiness (id, checked_at_ms) VALUES (1, 7)", []).map(drop))
            .await
            .unwrap();
        assert_eq!(store.read(checked_at).await.unwrap(), Some(7));
    }

    /// The readers cannot write: a write by mistake on one fails rather than bypassing the
    /// writer's commit rules.
    #[tokio::test]
    async fn a_reader_refuses_writes() {
        let (dir, store) = file_store("read-only");
        let refused = store
            .read(|c| c.execute("INSERT INTO readiness (id, checked_at_ms) VALUES (1, 1)", []).map(drop))
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("readonly"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
