//! Management groups in SQLite.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::records::ManagementGroup;

use super::SqliteStore;
use crate::GroupStore;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl GroupStore for SqliteStore {
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>> {
        self.run(|c| {
            let mut stmt = c.prepare_cached("SELECT id, name, description FROM management_group ORDER BY name, id")?;
            let rows =
                stmt.query_map([], |r| Ok(ManagementGroup { id: r.get(0)?, name: r.get(1)?, description: r.get(2)? }))?;
            rows.collect()
        })
        .await
    }
}
