//! Console sign-in on PostgreSQL: password hashes, TOTP factors, failed attempts and locks,
//! as `sqlite/sign_in.rs` has them for SQLite.

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::lockout::Attempt;

use super::credentials::principal_by_name;
use super::{PostgresStore, execute, pg, row};
use crate::rules;
use crate::{SignInRecord, SignInStore};

type Result<T> = std::result::Result<T, StoreError>;

/// Creates the principal's sign-in row when it has none (only for an existing principal).
const ENSURE_ROW: &str = "INSERT INTO principal_sign_in (principal) SELECT name FROM principal WHERE name = $1
     ON CONFLICT (principal) DO NOTHING";

#[async_trait]
impl SignInStore for PostgresStore {
    async fn sign_in_record(&self, principal: &str) -> Result<Option<SignInRecord>> {
        pg(async {
            let c = self.conn().await?;
            if principal_by_name(&*c, principal).await?.is_none() {
                return Ok(None);
            }
            let found = row(
                &*c,
                "SELECT password_hash, totp_secret, totp_confirmed_at_ms IS NOT NULL, failed_attempts, locked_until_ms
                 FROM principal_sign_in WHERE principal = $1",
                &[&principal],
            )
            .await?;
            let Some(r) = found else { return Ok(Some(SignInRecord::default())) };
            Ok(Some(SignInRecord {
                password_hash: r.try_get(0)?,
                totp_secret: r.try_get(1)?,
                totp_confirmed: r.try_get(2)?,
                failed_attempts: r.try_get(3)?,
                locked_until_ms: r.try_get(4)?,
            }))
        })
        .await
    }

    async fn set_password(&self, principal: &str, hash: &str) -> Result<bool> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            execute(&tx, ENSURE_ROW, &[&principal]).await?;
            let set = execute(
                &tx,
                "UPDATE principal_sign_in SET password_hash = $2, failed_attempts = 0, locked_until_ms = 0 WHERE principal = $1",
                &[&principal, &hash],
            )
            .await?
                == 1;
            tx.commit().await?;
            Ok(set)
        })
        .await
    }

    async fn begin_totp(&self, principal: &str, secret: &str) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            execute(&tx, ENSURE_ROW, &[&principal]).await?;
            execute(
                &tx,
                "UPDATE principal_sign_in SET totp_secret = $2, totp_confirmed_at_ms = NULL, last_totp_step = NULL
                 WHERE principal = $1 AND totp_confirmed_at_ms IS NULL",
                &[&principal, &secret],
            )
            .await?;
            Ok(tx.commit().await?)
        })
        .await
    }

    async fn confirm_totp(&self, principal: &str, now_ms: i64) -> Result<()> {
        self.sign_in_update(
            "UPDATE principal_sign_in SET totp_confirmed_at_ms = $2 WHERE principal = $1 AND totp_secret IS NOT NULL",
            principal,
            Some(now_ms),
        )
        .await
        .map(drop)
    }

    async fn reset_totp(&self, principal: &str) -> Result<bool> {
        self.sign_in_update(
            "UPDATE principal_sign_in SET totp_secret = NULL, totp_confirmed_at_ms = NULL, last_totp_step = NULL
             WHERE principal = $1 AND totp_secret IS NOT NULL AND $2::bigint IS NULL",
            principal,
            None,
        )
        .await
    }

    async fn take_totp_step(&self, principal: &str, step: i64) -> Result<bool> {
        self.sign_in_update(
            "UPDATE principal_sign_in SET last_totp_step = $2
             WHERE principal = $1 AND (last_totp_step IS NULL OR last_totp_step < $2)",
            principal,
            Some(step),
        )
        .await
    }

    async fn count_attempt(&self, principal: &str, now_ms: i64) -> Result<Attempt> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            execute(&tx, ENSURE_ROW, &[&principal]).await?;
            // FOR UPDATE: parallel attempts on one principal are counted one after another.
            let found = row(
                &tx,
                "SELECT failed_attempts, locked_until_ms FROM principal_sign_in WHERE principal = $1 FOR UPDATE",
                &[&principal],
            )
            .await?;
            let Some(found) = found else { return Ok(Attempt::Unknown) };
            let (attempt, write) = rules::count_attempt(found.try_get(0)?, found.try_get(1)?, now_ms);
            if let Some((failures, locked_until_ms)) = write {
                execute(
                    &tx,
                    "UPDATE principal_sign_in SET failed_attempts = $2, locked_until_ms = $3 WHERE principal = $1",
                    &[&principal, &failures, &locked_until_ms],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(attempt)
        })
        .await
    }

    async fn sign_in_succeeded(&self, principal: &str) -> Result<()> {
        self.sign_in_update(
            "UPDATE principal_sign_in SET failed_attempts = 0, locked_until_ms = 0 WHERE principal = $1 AND $2::bigint IS NULL",
            principal,
            None,
        )
        .await
        .map(drop)
    }
}

impl PostgresStore {
    /// One UPDATE of a principal's sign-in row (`$1` the principal, `$2` a number or NULL):
    /// whether a row changed.
    async fn sign_in_update(&self, sql: &str, principal: &str, number: Option<i64>) -> Result<bool> {
        pg(async { Ok(execute(&*self.conn().await?, sql, &[&principal, &number]).await? == 1) }).await
    }
}
