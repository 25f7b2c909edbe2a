//! Management groups on PostgreSQL.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::records::ManagementGroup;

use super::{PostgresStore, pg, rows};
use crate::GroupStore;

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl GroupStore for PostgresStore {
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>> {
        pg(async {
            let c = self.conn().await?;
            rows(&*c, "SELECT id, name, description FROM management_group ORDER BY name, id", &[])
                .await?
                .iter()
                .map(|r| Ok(ManagementGroup { id: r.try_get(0)?, name: r.try_get(1)?, description: r.try_get(2)? }))
                .collect()
        })
        .await
    }
}
