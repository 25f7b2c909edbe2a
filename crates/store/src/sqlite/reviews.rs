//! Access reviews in SQLite (see [`crate::ReviewStore`]).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::reviews::{Campaign, Decision, Grant, GrantKey, GrantType, ReviewRefusal, snapshot};

use super::SqliteStore;
use super::credentials::{all_principals, tokens_of};
use crate::federated::idp_grants_of;
use crate::reviews::{
    CAMPAIGN_COLUMNS, Closed, GRANT_COLUMNS, RecordDecision, Refusable, ReviewStore, new_campaign_id,
    refuse_unless_open, unknown_grant,
};

type Result<T> = std::result::Result<T, toolgate_domain::StoreError>;

/// One grant of one campaign, by its key (`?1` to `?5`).
const GRANT_KEY: &str =
    "campaign_id = ?1 AND principal_type = ?2 AND principal_id = ?3 AND role_name = ?4 AND group_id = ?5";

fn campaign_row(r: &rusqlite::Row) -> rusqlite::Result<Campaign> {
    Ok(Campaign {
        campaign_id: r.get(0)?,
        title: r.get(1)?,
        opened_by: r.get(2)?,
        opened_at: r.get(3)?,
        closed_by: r.get(4)?,
        closed_at: r.get(5)?,
    })
}

fn grant_row(r: &rusqlite::Row) -> rusqlite::Result<Grant> {
    let principal_type: String = r.get(0)?;
    Ok(Grant {
        key: GrantKey {
            principal_type: GrantType::from_label(&principal_type).unwrap_or(GrantType::User),
            principal_id: r.get(1)?,
            role_name: r.get(2)?,
            group_id: r.get(3)?,
        },
        holder: r.get(4)?,
        decision: r.get::<_, Option<String>>(5)?.as_deref().and_then(Decision::from_label),
        justification: r.get(6)?,
        decided_by: r.get(7)?,
        decided_at: r.get(8)?,
        applied_at: r.get(9)?,
        source: r.get(10)?,
    })
}

fn campaign(c: &Connection, id: &str) -> rusqlite::Result<Option<Campaign>> {
    c.query_row(&format!("SELECT {CAMPAIGN_COLUMNS} FROM access_review WHERE id = ?1"), params![id], campaign_row)
        .optional()
}

fn grants(c: &Connection, id: &str) -> rusqlite::Result<Vec<Grant>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {GRANT_COLUMNS} FROM access_review_grant WHERE campaign_id = ?1 ORDER BY principal_type, principal_id, role_name, group_id"
    ))?;
    stmt.query_map(params![id], grant_row)?.collect()
}

fn grant(c: &Connection, id: &str, key: &GrantKey) -> rusqlite::Result<Option<Grant>> {
    c.query_row(
        &format!("SELECT {GRANT_COLUMNS} FROM access_review_grant WHERE {GRANT_KEY}"),
        params![id, key.principal_type.label(), key.principal_id, key.role_name, key.group_id],
        grant_row,
    )
    .optional()
}

/// Takes a flagged grant away: a fleet-wide role, a role on a group, a token.
fn apply(c: &Connection, g: &Grant, now: i64) -> rusqlite::Result<()> {
    let GrantKey { principal_type, principal_id, role_name, group_id } = &g.key;
    match principal_type {
        GrantType::User | GrantType::Engine => {
            let roles: Option<String> = c
                .query_row("SELECT roles FROM principal WHERE name = ?1", params![principal_id], |r| r.get(0))
                .optional()?;
            if let Some(roles) = roles {
                let kept: Vec<&str> = roles.split(',').filter(|r| !r.is_empty() && r != role_name).collect();
                c.execute("UPDATE principal SET roles = ?2 WHERE name = ?1", params![principal_id, kept.join(",")])?;
            }
        }
        GrantType::Group => {
            c.execute(
                "DELETE FROM group_role WHERE principal = ?1 AND group_id = ?2 AND role = ?3",
                params![principal_id, group_id, role_name],
            )?;
        }
        GrantType::Token => {
            c.execute(
                "UPDATE api_token SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![principal_id, now],
            )?;
        }
        // Only the identity provider can take it away (`Closed::at_idp`).
        GrantType::Idp => {}
    }
    Ok(())
}

#[async_trait]
impl ReviewStore for SqliteStore {
    async fn open_review(&self, title: &str, by: &str, now: i64) -> Result<(Campaign, usize)> {
        let (title, by) = (title.to_string(), by.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            let idp = idp_grants_of(super::federated::all_identities(&tx)?);
            let standing = snapshot(&all_principals(&tx)?, &tokens_of(&tx, None)?, &idp, now);
            let campaign = Campaign { campaign_id: new_campaign_id(), title, opened_by: by, opened_at: now, closed_by: None, closed_at: None };
            tx.execute(
                "INSERT INTO access_review (id, title, opened_by, opened_at) VALUES (?1, ?2, ?3, ?4)",
                params![campaign.campaign_id, campaign.title, campaign.opened_by, now],
            )?;
            for g in &standing {
                tx.execute(
                    "INSERT INTO access_review_grant (campaign_id, principal_type, principal_id, role_name, group_id, holder, source)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
                    params![campaign.campaign_id, g.key.principal_type.label(), g.key.principal_id, g.key.role_name, g.key.group_id, g.holder, g.source],
                )?;
            }
            tx.commit()?;
            Ok((campaign, standing.len()))
        })
        .await
    }

    async fn reviews(&self) -> Result<Vec<(Campaign, Vec<Grant>)>> {
        self.run(|c| {
            let mut stmt =
                c.prepare(&format!("SELECT {CAMPAIGN_COLUMNS} FROM access_review ORDER BY opened_at DESC, id"))?;
            let campaigns = stmt.query_map([], campaign_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
            campaigns.into_iter().map(|k| grants(c, &k.campaign_id).map(|g| (k, g))).collect()
        })
        .await
    }

    async fn review(&self, campaign_id: &str) -> Result<Option<(Campaign, Vec<Grant>)>> {
        let id = campaign_id.to_string();
        self.run(move |c| campaign(c, &id)?.map(|k| grants(c, &id).map(|g| (k, g))).transpose()).await
    }

    async fn record_decision(&self, d: RecordDecision<'_>) -> Refusable<(Option<Decision>, Grant)> {
        let (id, key, decision, justification, by, now) = (
            d.campaign_id.to_string(),
            d.key,
            d.decision,
            d.justification.map(str::to_string),
            d.by.to_string(),
            d.now,
        );
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Some(refusal) = refuse_unless_open(campaign(&tx, &id)?.as_ref(), &id) {
                return Ok(Err(refusal));
            }
            let Some(before) = grant(&tx, &id, &key)? else { return Ok(Err(unknown_grant(&id, &key))) };
            if before.holder == by {
                return Ok(Err(ReviewRefusal::OwnGrant(by)));
            }
            tx.execute(
                &format!(
                    "UPDATE access_review_grant SET decision = ?6, justification = ?7, decided_by = ?8, decided_at = ?9 WHERE {GRANT_KEY}"
                ),
                params![id, key.principal_type.label(), key.principal_id, key.role_name, key.group_id, decision.label(), justification, by, now],
            )?;
            let after = grant(&tx, &id, &key)?.expect("updated above");
            tx.commit()?;
            Ok(Ok((before.decision, after)))
        })
        .await
    }

    async fn close_review(&self, campaign_id: &str, by: &str, now: i64, allow_undecided: bool) -> Refusable<Closed> {
        let (id, by) = (campaign_id.to_string(), by.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Some(refusal) = refuse_unless_open(campaign(&tx, &id)?.as_ref(), &id) {
                return Ok(Err(refusal));
            }
            let all = grants(&tx, &id)?;
            let undecided: Vec<Grant> = all.iter().filter(|g| g.decision.is_none()).cloned().collect();
            if !undecided.is_empty() && !allow_undecided {
                return Ok(Err(ReviewRefusal::Undecided { campaign: id, count: undecided.len() }));
            }
            let (mut applied, mut at_idp) = (Vec::new(), Vec::new());
            for g in all.into_iter().filter(|g| g.decision == Some(Decision::FlaggedRevoke)) {
                if g.key.principal_type == GrantType::Idp {
                    at_idp.push(g);
                    continue;
                }
                apply(&tx, &g, now)?;
                tx.execute(
                    &format!("UPDATE access_review_grant SET applied_at = ?6 WHERE {GRANT_KEY}"),
                    params![id, g.key.principal_type.label(), g.key.principal_id, g.key.role_name, g.key.group_id, now],
                )?;
                applied.push(Grant { applied_at: Some(now), ..g });
            }
            tx.execute("UPDATE access_review SET closed_by = ?2, closed_at = ?3 WHERE id = ?1", params![id, by, now])?;
            let closed = campaign(&tx, &id)?.expect("closed above");
            tx.commit()?;
            Ok(Ok(Closed { campaign: closed, applied, undecided, at_idp }))
        })
        .await
    }
}
