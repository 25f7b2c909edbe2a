//! [`SignInStore`] on SQLite: one row per principal that has a password or a factor.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::lockout::Attempt;

use super::SqliteStore;
use crate::{SignInRecord, SignInStore, rules};

type Result<T> = std::result::Result<T, StoreError>;

/// Creates the principal's row when it has none (only for an existing principal).
const ENSURE_ROW: &str = "INSERT INTO principal_sign_in (principal) SELECT name FROM principal WHERE name = ?1
     ON CONFLICT (principal) DO NOTHING";

#[async_trait]
impl SignInStore for SqliteStore {
    async fn sign_in_record(&self, principal: &str) -> Result<Option<SignInRecord>> {
        let principal = principal.to_string();
        self.run(move |c| {
            let exists: bool =
                c.query_row("SELECT count(*) FROM principal WHERE name = ?1", params![principal], |r| r.get::<_, i64>(0))?
                    > 0;
            if !exists {
                return Ok(None);
            }
            let record = c
                .query_row(
                    "SELECT password_hash, totp_secret, totp_confirmed_at_ms IS NOT NULL, failed_attempts, locked_until_ms
                     FROM principal_sign_in WHERE principal = ?1",
                    params![principal],
                    |r| {
                        Ok(SignInRecord {
                            password_hash: r.get(0)?,
                            totp_secret: r.get(1)?,
                            totp_confirmed: r.get(2)?,
                            failed_attempts: r.get(3)?,
                            locked_until_ms: r.get(4)?,
                        })
                    },
                )
                .optional()?;
            Ok(Some(record.unwrap_or_default()))
        })
        .await
    }

    async fn set_password(&self, principal: &str, hash: &str) -> Result<bool> {
        let (principal, hash) = (principal.to_string(), hash.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            tx.execute(ENSURE_ROW, params![principal])?;
            let set = tx.execute(
                "UPDATE principal_sign_in SET password_hash = ?2, failed_attempts = 0, locked_until_ms = 0 WHERE principal = ?1",
                params![principal, hash],
            )? == 1;
            tx.commit()?;
            Ok(set)
        })
        .await
    }

    async fn begin_totp(&self, principal: &str, secret: &str) -> Result<()> {
        let (principal, secret) = (principal.to_string(), secret.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            tx.execute(ENSURE_ROW, params![principal])?;
            tx.execute(
                "UPDATE principal_sign_in SET totp_secret = ?2, totp_confirmed_at_ms = NULL, last_totp_step = NULL
                 WHERE principal = ?1 AND totp_confirmed_at_ms IS NULL",
                params![principal, secret],
            )?;
            tx.commit()
        })
        .await
    }

    async fn confirm_totp(&self, principal: &str, now_ms: i64) -> Result<()> {
        let principal = principal.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE principal_sign_in SET totp_confirmed_at_ms = ?2 WHERE principal = ?1 AND totp_secret IS NOT NULL",
                params![principal, now_ms],
            )
            .map(drop)
        })
        .await
    }

    async fn reset_totp(&self, principal: &str) -> Result<bool> {
        let principal = principal.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE principal_sign_in SET totp_secret = NULL, totp_confirmed_at_ms = NULL, last_totp_step = NULL
                 WHERE principal = ?1 AND totp_secret IS NOT NULL",
                params![principal],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn take_totp_step(&self, principal: &str, step: i64) -> Result<bool> {
        let principal = principal.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE principal_sign_in SET last_totp_step = ?2
                 WHERE principal = ?1 AND (last_totp_step IS NULL OR last_totp_step < ?2)",
                params![principal, step],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn count_attempt(&self, principal: &str, now_ms: i64) -> Result<Attempt> {
        let principal = principal.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            tx.execute(ENSURE_ROW, params![principal])?;
            let row: Option<(i64, i64)> = tx
                .query_row(
                    "SELECT failed_attempts, locked_until_ms FROM principal_sign_in WHERE principal = ?1",
                    params![principal],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((failed, locked_until_ms)) = row else { return Ok(Attempt::Unknown) };
            let (attempt, write) = rules::count_attempt(failed, locked_until_ms, now_ms);
            if let Some((failures, locked_until_ms)) = write {
                tx.execute(
                    "UPDATE principal_sign_in SET failed_attempts = ?2, locked_until_ms = ?3 WHERE principal = ?1",
                    params![principal, failures, locked_until_ms],
                )?;
            }
            tx.commit()?;
            Ok(attempt)
        })
        .await
    }

    async fn sign_in_succeeded(&self, principal: &str) -> Result<()> {
        let principal = principal.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE principal_sign_in SET failed_attempts = 0, locked_until_ms = 0 WHERE principal = ?1",
                params![principal],
            )
            .map(drop)
        })
        .await
    }
}
