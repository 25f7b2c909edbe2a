//! Access reviews on PostgreSQL (see [`crate::ReviewStore`] and the SQLite twin). Closing
//! tells every replica's credential cache.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::reviews::{Campaign, Decision, Grant, GrantKey, GrantType, ReviewRefusal, snapshot};

use super::credentials::{all_principals, tokens_of};
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::changes::Change;
use crate::federated::idp_grants_of;
use crate::reviews::{
    CAMPAIGN_COLUMNS, Closed, GRANT_COLUMNS, RecordDecision, Refusable, ReviewStore, new_campaign_id,
    refuse_unless_open, unknown_grant,
};

type Result<T> = std::result::Result<T, toolgate_domain::StoreError>;

const GRANT_KEY: &str =
    "campaign_id = $1 AND principal_type = $2 AND principal_id = $3 AND role_name = $4 AND group_id = $5";

fn campaign_row(r: &tokio_postgres::Row) -> Pg<Campaign> {
    Ok(Campaign {
        campaign_id: r.try_get(0)?,
        title: r.try_get(1)?,
        opened_by: r.try_get(2)?,
        opened_at: r.try_get(3)?,
        closed_by: r.try_get(4)?,
        closed_at: r.try_get(5)?,
    })
}

fn grant_row(r: &tokio_postgres::Row) -> Pg<Grant> {
    Ok(Grant {
        key: GrantKey {
            principal_type: GrantType::from_label(r.try_get(0)?).unwrap_or(GrantType::User),
            principal_id: r.try_get(1)?,
            role_name: r.try_get(2)?,
            group_id: r.try_get(3)?,
        },
        holder: r.try_get(4)?,
        decision: r.try_get::<_, Option<&str>>(5)?.and_then(Decision::from_label),
        justification: r.try_get(6)?,
        decided_by: r.try_get(7)?,
        decided_at: r.try_get(8)?,
        applied_at: r.try_get(9)?,
        source: r.try_get(10)?,
    })
}

async fn campaign(c: &impl GenericClient, id: &str, lock: bool) -> Pg<Option<Campaign>> {
    let sql =
        format!("SELECT {CAMPAIGN_COLUMNS} FROM access_review WHERE id = $1{}", if lock { " FOR UPDATE" } else { "" });
    row(c, &sql, &[&id]).await?.as_ref().map(campaign_row).transpose()
}

async fn grants(c: &impl GenericClient, id: &str) -> Pg<Vec<Grant>> {
    let sql = format!(
        "SELECT {GRANT_COLUMNS} FROM access_review_grant WHERE campaign_id = $1 ORDER BY principal_type, principal_id, role_name, group_id"
    );
    rows(c, &sql, &[&id]).await?.iter().map(grant_row).collect()
}

async fn grant(c: &impl GenericClient, id: &str, key: &GrantKey) -> Pg<Option<Grant>> {
    let sql = format!("SELECT {GRANT_COLUMNS} FROM access_review_grant WHERE {GRANT_KEY}");
    let params = [
        &id as &(dyn tokio_postgres::types::ToSql + Sync),
        &key.principal_type.label(),
        &key.principal_id,
        &key.role_name,
        &key.group_id,
    ];
    row(c, &sql, &params).await?.as_ref().map(grant_row).transpose()
}

/// Takes a flagged grant away (see the SQLite twin).
async fn apply(c: &impl GenericClient, g: &Grant, now: i64) -> Pg<()> {
    let GrantKey { principal_type, principal_id, role_name, group_id } = &g.key;
    match principal_type {
        GrantType::User | GrantType::Engine => {
            let found = row(c, "SELECT roles FROM principal WHERE name = $1 FOR UPDATE", &[principal_id]).await?;
            if let Some(found) = found {
                let roles: String = found.try_get(0)?;
                let kept: Vec<&str> = roles.split(',').filter(|r| !r.is_empty() && r != role_name).collect();
                execute(c, "UPDATE principal SET roles = $2 WHERE name = $1", &[principal_id, &kept.join(",")]).await?;
            }
        }
        GrantType::Group => {
            let sql = "DELETE FROM group_role WHERE principal = $1 AND group_id = $2 AND role = $3";
            execute(c, sql, &[principal_id, group_id, role_name]).await?;
        }
        GrantType::Token => {
            execute(
                c,
                "UPDATE api_token SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                &[principal_id, &now],
            )
            .await?;
        }
        // Only the identity provider can take it away (`Closed::at_idp`).
        GrantType::Idp => {}
    }
    Ok(())
}

#[async_trait]
impl ReviewStore for PostgresStore {
    async fn open_review(&self, title: &str, by: &str, now: i64) -> Result<(Campaign, usize)> {
        pg(async {
            let mut c = self.conn().await?;
            // One snapshot of every grant: REPEATABLE READ, so the reads agree with each other.
            let tx = c.build_transaction().isolation_level(tokio_postgres::IsolationLevel::RepeatableRead).start().await?;
            let idp = idp_grants_of(super::federated::all_identities(&tx).await?);
            let standing = snapshot(&all_principals(&tx).await?, &tokens_of(&tx, None).await?, &idp, now);
            let campaign = Campaign {
                campaign_id: new_campaign_id(),
                title: title.to_string(),
                opened_by: by.to_string(),
                opened_at: now,
                closed_by: None,
                closed_at: None,
            };
            execute(
                &tx,
                "INSERT INTO access_review (id, title, opened_by, opened_at) VALUES ($1, $2, $3, $4)",
                &[&campaign.campaign_id, &campaign.title, &campaign.opened_by, &now],
            )
            .await?;
            for g in &standing {
                execute(
                    &tx,
                    "INSERT INTO access_review_grant (campaign_id, principal_type, principal_id, role_name, group_id, holder, source)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                    &[&campaign.campaign_id, &g.key.principal_type.label(), &g.key.principal_id, &g.key.role_name, &g.key.group_id, &g.holder, &g.source],
                )
                .await?;
            }
            tx.commit().await?;
            Ok((campaign, standing.len()))
        })
        .await
    }

    async fn reviews(&self) -> Result<Vec<(Campaign, Vec<Grant>)>> {
        pg(async {
            let c = self.conn().await?;
            let sql = format!("SELECT {CAMPAIGN_COLUMNS} FROM access_review ORDER BY opened_at DESC, id");
            let campaigns = rows(&*c, &sql, &[]).await?.iter().map(campaign_row).collect::<Pg<Vec<_>>>()?;
            let mut out = Vec::with_capacity(campaigns.len());
            for k in campaigns {
                let g = grants(&*c, &k.campaign_id).await?;
                out.push((k, g));
            }
            Ok(out)
        })
        .await
    }

    async fn review(&self, campaign_id: &str) -> Result<Option<(Campaign, Vec<Grant>)>> {
        pg(async {
            let c = self.conn().await?;
            match campaign(&*c, campaign_id, false).await? {
                Some(k) => Ok(Some((k, grants(&*c, campaign_id).await?))),
                None => Ok(None),
            }
        })
        .await
    }

    async fn record_decision(&self, d: RecordDecision<'_>) -> Refusable<(Option<Decision>, Grant)> {
        let id = d.campaign_id;
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            if let Some(refusal) = refuse_unless_open(campaign(&tx, id, true).await?.as_ref(), id) {
                return Ok(Err(refusal));
            }
            let Some(before) = grant(&tx, id, &d.key).await? else { return Ok(Err(unknown_grant(id, &d.key))) };
            if before.holder == d.by {
                return Ok(Err(ReviewRefusal::OwnGrant(d.by.to_string())));
            }
            let sql = format!(
                "UPDATE access_review_grant SET decision = $6, justification = $7, decided_by = $8, decided_at = $9 WHERE {GRANT_KEY}"
            );
            let k = &d.key;
            execute(
                &tx,
                &sql,
                &[&id, &k.principal_type.label(), &k.principal_id, &k.role_name, &k.group_id, &d.decision.label(), &d.justification, &d.by, &d.now],
            )
            .await?;
            let after = grant(&tx, id, &d.key).await?.expect("updated above");
            tx.commit().await?;
            Ok(Ok((before.decision, after)))
        })
        .await
    }

    async fn close_review(&self, campaign_id: &str, by: &str, now: i64, allow_undecided: bool) -> Refusable<Closed> {
        let id = campaign_id;
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            if let Some(refusal) = refuse_unless_open(campaign(&tx, id, true).await?.as_ref(), id) {
                return Ok(Err(refusal));
            }
            let all = grants(&tx, id).await?;
            let undecided: Vec<Grant> = all.iter().filter(|g| g.decision.is_none()).cloned().collect();
            if !undecided.is_empty() && !allow_undecided {
                return Ok(Err(ReviewRefusal::Undecided { campaign: id.to_string(), count: undecided.len() }));
            }
            let (mut applied, mut at_idp) = (Vec::new(), Vec::new());
            for g in all.into_iter().filter(|g| g.decision == Some(Decision::FlaggedRevoke)) {
                if g.key.principal_type == GrantType::Idp {
                    at_idp.push(g);
                    continue;
                }
                apply(&tx, &g, now).await?;
                let k = &g.key;
                let sql = format!("UPDATE access_review_grant SET applied_at = $6 WHERE {GRANT_KEY}");
                execute(&tx, &sql, &[&id, &k.principal_type.label(), &k.principal_id, &k.role_name, &k.group_id, &now])
                    .await?;
                applied.push(Grant { applied_at: Some(now), ..g });
            }
            execute(&tx, "UPDATE access_review SET closed_by = $2, closed_at = $3 WHERE id = $1", &[&id, &by, &now])
                .await?;
            if !applied.is_empty() {
                self.notify(&tx, Change::Credentials).await?;
            }
            let closed = campaign(&tx, id, false).await?.expect("closed above");
            tx.commit().await?;
            Ok(Ok(Closed { campaign: closed, applied, undecided, at_idp }))
        })
        .await
    }
}
