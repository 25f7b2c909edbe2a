//! Which store a command opens: the embedded SQLite file in the data directory (the default),
//! or a PostgreSQL database shared by several replicas (`--database postgres://…`, or the
//! variable TOOLGATE_DATABASE, read by `serve`, `agent` and every data-touching command).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolgate_store::{PostgresStore, Repositories, SQLITE_FILE_NAME, SqliteStore};

/// `--data-dir` and `--database`, flattened into every command that touches the store.
#[derive(Clone, Debug, clap::Args)]
pub struct StoreArgs {
    /// Where the server keeps its files (the SQLite store, the compliance rules, keys).
    #[arg(long, value_name = "DIR", default_value = "toolgate-data", global = true, env = "TOOLGATE_DATA_DIR")]
    pub data_dir: PathBuf,
    /// `sqlite` (the file in --data-dir; the default) or a PostgreSQL URL,
    /// postgres://user:password@host:port/database, shared by several replicas.
    #[arg(long, value_name = "URL", global = true, env = "TOOLGATE_DATABASE")]
    pub database: Option<String>,
}

impl StoreArgs {
    pub fn database(&self) -> Result<Database> {
        Database::from_flags(&self.data_dir, self.database.as_deref())
    }
}

/// A store to open.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    Sqlite { file: PathBuf },
    Postgres { url: String },
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Database {
    pub fn from_flags(data_dir: &Path, database: Option<&str>) -> Result<Self> {
        match database.map(str::trim) {
            None | Some("") | Some("sqlite") => Ok(Database::Sqlite { file: data_dir.join(SQLITE_FILE_NAME) }),
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Ok(Database::Postgres { url: url.to_string() })
            }
            Some(other) => bail!(
                "--database (TOOLGATE_DATABASE): `{}` is neither `sqlite` nor a PostgreSQL URL \
                 (postgres://user:password@host:port/database)",
                redact(other)
            ),
        }
    }

    /// What messages may show: the file, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            Database::Sqlite { file } => file.display().to_string(),
            Database::Postgres { url } => redact(url),
        }
    }

    /// The flag that names this store on the command line (the password left out).
    pub fn flag(&self) -> String {
        match self {
            Database::Sqlite { file } => format!("--data-dir {}", file.parent().unwrap_or(Path::new(".")).display()),
            Database::Postgres { .. } => format!("--database {}", self.describe()),
        }
    }

    /// Opens the store, creating it (SQLite: the file and its directory) when `create`;
    /// otherwise a missing SQLite file is an error that says how to create it. `replica`
    /// names this process in the rows it writes to a shared database.
    pub async fn open(&self, create: bool, replica: &str) -> Result<Repositories> {
        match self {
            Database::Sqlite { file } => Ok(self.open_sqlite(file, create)?.repositories()),
            Database::Postgres { url } => Ok(PostgresStore::connect(url, replica)
                .await
                .with_context(|| format!("cannot open the store {}", self.describe()))?
                .repositories()),
        }
    }

    /// The SQLite store itself (for what only it can do, such as `backup`).
    pub fn open_sqlite(&self, file: &Path, create: bool) -> Result<SqliteStore> {
        if let Some(dir) = file.parent().filter(|d| create && !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create data dir {}", dir.display()))?;
        }
        if !create && !file.exists() {
            let dir = file.parent().unwrap_or(Path::new("."));
            bail!(
                "no store at {}: start the server once (`toolgate serve --data-dir {}`) or pass --data-dir (or --database)",
                file.display(),
                dir.display()
            );
        }
        SqliteStore::open(file).with_context(|| format!("cannot open the store {}", file.display()))
    }
}

/// A URL with its password replaced by `***` (a URL that does not parse is shown as given up
/// to its `@`).
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    match rest.rsplit_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            let hidden = if credentials.contains(':') { format!("{user}:***") } else { user.to_string() };
            format!("{scheme}://{hidden}@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_choose_a_backend_and_messages_never_show_a_password() {
        let dir = Path::new("d");
        assert_eq!(Database::from_flags(dir, None).unwrap(), Database::Sqlite { file: dir.join(SQLITE_FILE_NAME) });
        assert_eq!(
            Database::from_flags(dir, Some("sqlite")).unwrap(),
            Database::Sqlite { file: dir.join(SQLITE_FILE_NAME) }
        );
        let pg = Database::from_flags(dir, Some("postgres://tg:s3cret@db:5432/toolgate")).unwrap();
        assert_eq!(pg.describe(), "postgres://tg:***@db:5432/toolgate");
        let refused = Database::from_flags(dir, Some("mysql://u:pw@h/db")).unwrap_err().to_string();
        assert!(refused.contains("mysql://u:***@h/db") && !refused.contains("pw"), "{refused}");
    }
}
