//! Management groups: named sets of agents that scopes start from.

use serde::Serialize;

use super::{Store, StoreError};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ManagementGroup {
    pub id: String,
    pub name: String,
    pub description: String,
}

impl Store {
    pub fn management_groups(&self) -> Result<Vec<ManagementGroup>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached("SELECT id, name, description FROM management_group ORDER BY name, id")?;
        let rows =
            stmt.query_map([], |r| Ok(ManagementGroup { id: r.get(0)?, name: r.get(1)?, description: r.get(2)? }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
