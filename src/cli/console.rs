//! Console commands on the store: tokens, principals and the break-glass review of approvals.
//! They open the same SQLite file as a running server (WAL), so they work while it runs.

use std::path::Path;

use anyhow::{Context, Result, bail};
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::engines::PrincipalKind;
use toolgate_domain::tokens::{MAX_TOKEN_DAYS, MAX_TOKEN_SECS, NewToken};
use toolgate_domain::{Clock, approvals::Approval};
use toolgate_store::{AuditStore, Repositories, SQLITE_FILE_NAME};

use crate::database::{Database, StoreArgs};

use crate::registry::CATALOGUE;
use toolgate_gate::Decide;

/// Opens the store a console command works on (it must exist: the server creates it).
pub async fn open(store: &StoreArgs) -> Result<Repositories> {
    store.database()?.open(false, "cli").await
}

/// `principal set-password`: the console's first factor, hashed with argon2id.
pub async fn principal_set_password(store: &Repositories, name: &str, password: &str) -> Result<String> {
    if store.credentials.principal(name).await?.is_some_and(|p| p.kind == PrincipalKind::Engine) {
        bail!("`{name}` is an engine principal: automation never signs in to the console");
    }
    let hash = crate::http::console_factor::hash_password(password)?;
    if !store.sign_in.set_password(name, &hash).await? {
        bail!("no principal `{name}` (`toolgate principal list` shows them)");
    }
    audit_now(store, "console.password_set", name).await;
    Ok(format!("set the console password of `{name}`; they sign in at /console and enroll an authenticator app\n"))
}

/// `principal reset-factor`: for a lost device; the next sign-in enrolls a new factor.
pub async fn principal_reset_factor(store: &Repositories, name: &str) -> Result<String> {
    if !store.sign_in.reset_totp(name).await? {
        bail!("`{name}` has no second factor (or no such principal)");
    }
    audit_now(store, "console.factor_reset", name).await;
    Ok(format!("removed the second factor of `{name}`; their next sign-in enrolls a new one\n"))
}

/// One successful console action's audit row, written durably now (the CLI has no audit
/// writer); a row that cannot be written is a warning, not a failure of the action done.
pub(crate) async fn audit_now(store: &Repositories, action: &str, target: &str) {
    let event = AuditEvent::new(Clock::default().now_ms(), action, AuditOutcome::Success)
        .target(TargetType::Principal, target.to_string());
    if let Err(err) = store.audit.append([event].into(), true).await {
        eprintln!("warning: the audit row could not be written ({err})");
    }
}

/// `toolgate backup`: a consistent copy of the store, written while the server may be running.
pub async fn backup(store: &StoreArgs, to: &Path) -> Result<String> {
    let database = store.database()?;
    let Database::Sqlite { file: path } = &database else {
        bail!(
            "the store is PostgreSQL ({}): back it up with PostgreSQL's own tools (pg_dump, or base backups with WAL archiving; docs/operations.md)",
            database.describe()
        );
    };
    if to.exists() {
        bail!("{} exists: a backup is written to a new file (choose another name)", to.display());
    }
    let store = database.open_sqlite(path, false)?;
    store.backup_to(to).await.with_context(|| format!("cannot write {}", to.display()))?;
    // On disk before we say so.
    std::fs::File::open(to).and_then(|f| f.sync_all()).with_context(|| format!("cannot sync {}", to.display()))?;
    let bytes = std::fs::metadata(to)?.len();
    Ok(format!(
        "wrote {} ({bytes} bytes): a consistent copy of {}.
         To restore: stop the server, move the data dir's {SQLITE_FILE_NAME}* files away, copy this file to          {} and start the server.
",
        to.display(),
        path.display(),
        path.display(),
    ))
}

/// `30d`, `12h`, `90m` or plain seconds -> seconds.
pub fn parse_duration(text: &str) -> Result<i64> {
    toolgate_catalogue::deployment::parse_duration(text).map_err(anyhow::Error::msg)
}

/// `tier: None` makes an API credential (approvals, audit), for principals who may approve.
/// `toolgate token create`'s choices.
pub struct NewCredential<'a> {
    /// None: an API credential without MCP tier.
    pub tier: Option<&'a str>,
    pub expires_in: &'a str,
    pub name: &'a str,
    /// The toolsets its client is shown when it chooses none (docs/toolsets.md).
    pub toolsets: Option<&'a str>,
}

pub async fn token_create(store: &Repositories, principal: &str, asked: NewCredential<'_>) -> Result<String> {
    let NewCredential { tier, expires_in, name, toolsets } = asked;
    if toolsets.is_some() && tier.is_none() {
        bail!("--toolsets chooses what an MCP client is shown: an API credential (--api) has no tools");
    }
    let toolsets = match toolsets.map(|t| toolgate_domain::toolsets::canonical(t, CATALOGUE.toolsets)) {
        Some(Err(e)) => bail!("--toolsets: {e}"),
        Some(Ok(t)) => Some(t),
        None => None,
    };
    if let Some(tier) = tier.filter(|t| CATALOGUE.tier(t).is_none()) {
        bail!("no tier `{tier}`; {}", toolgate_policy::did_you_mean(tier, CATALOGUE.tier_names()));
    }
    let seconds = parse_duration(expires_in)?;
    if seconds > MAX_TOKEN_SECS {
        bail!("an MCP token may live at most {MAX_TOKEN_DAYS} days (asked: {expires_in})");
    }
    let Some(p) = store.credentials.principal(principal).await? else {
        let known: Vec<String> = store.credentials.principals().await?.into_iter().map(|p| p.name).collect();
        bail!(
            "no principal `{principal}`; {}",
            toolgate_policy::did_you_mean(principal, known.iter().map(String::as_str))
        );
    };
    if tier.is_none() && CATALOGUE.review_reach(&p.principal()).is_none() {
        bail!(
            "an API credential is for reviewers: `{principal}`'s roles (fleet-wide or on groups) do not grant {}",
            CATALOGUE.reviewer
        );
    }
    let now = Clock::default().now_secs();
    let (record, secret) = store
        .credentials
        .create_token(NewToken { principal, tier, name, now, expires_at: now + seconds, toolsets: toolsets.as_deref() })
        .await?;
    let kind = tier.map_or("API credential, no MCP tier".to_string(), |t| format!("tier {t}"));
    Ok(format!(
        "created {} for `{principal}` ({kind}, expires in {expires_in}); the secret is shown only now:\n\n    {secret}\n",
        record.id
    ))
}

pub async fn token_list(store: &Repositories) -> Result<String> {
    let now = Clock::default().now_secs();
    let mut out = format!("{:<22} {:<12} {:<12} {:<11} {:<9} name\n", "id", "principal", "tier", "expires in", "state");
    for t in store.credentials.tokens(None).await? {
        let left = (t.expires_at - now).max(0);
        out.push_str(&format!(
            "{:<22} {:<12} {:<12} {:<11} {:<9} {}\n",
            t.id,
            t.principal,
            t.tier.as_deref().unwrap_or("(none)"),
            format!("{}d{}h", left / 86_400, left % 86_400 / 3600),
            t.state(now).label(),
            t.name
        ));
    }
    Ok(out)
}

pub async fn token_revoke(store: &Repositories, id: &str) -> Result<String> {
    if store.credentials.revoke_token(id, Clock::default().now_secs()).await? {
        Ok(format!("revoked {id}\n"))
    } else {
        bail!("no active token `{id}` (`toolgate token list` shows them)")
    }
}

pub async fn principal_add(store: &Repositories, name: &str, roles: &[String]) -> Result<String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b)) {
        bail!("principal names are letters, digits and . _ - @ (got `{name}`)");
    }
    if store.credentials.principal(name).await?.is_some_and(|p| p.kind == PrincipalKind::Engine) {
        bail!("`{name}` is an engine principal: its roles change with assign_engine_role and unassign_engine_role");
    }
    for role in roles {
        if !CATALOGUE.role_names().any(|known| known == role) {
            bail!("no role `{role}` in policy.yaml; {}", toolgate_policy::did_you_mean(role, CATALOGUE.role_names()));
        }
    }
    let existed = store.credentials.principal(name).await?.is_some();
    store.credentials.put_principal(name, roles, Clock::default().now_secs()).await?;
    let roles = match roles {
        [] => "no fleet-wide role (`toolgate group assign` gives it roles on management groups)".to_string(),
        _ => format!("roles {}", roles.join(", ")),
    };
    Ok(format!("{} principal `{name}` with {roles}\n", if existed { "updated" } else { "added" }))
}

pub async fn principal_list(store: &Repositories) -> Result<String> {
    let links = store.federated.federated_identities(None).await?;
    let mut out = format!("{:<24} {:<32} signs in as\n", "principal", "roles");
    for p in store.credentials.principals().await? {
        let link = links.iter().find(|l| l.principal == p.name);
        let signs_in = link.map_or(String::new(), |l| {
            let who = l.email.as_deref().or(l.display_name.as_deref()).map(|w| format!(" ({w})")).unwrap_or_default();
            format!("{} at {}{who}", l.subject, l.issuer)
        });
        out.push_str(&format!("{:<24} {:<32} {signs_in}\n", p.name, p.roles.join(", ")));
    }
    Ok(out)
}

/// Links a person to their identity provider's subject beforehand (deployments that refuse
/// people not provisioned: `provisioning: pre_provisioned`).
pub async fn principal_link(store: &Repositories, name: &str, issuer: &str, subject: &str) -> Result<String> {
    if subject.is_empty() {
        bail!("--subject is empty: give the `sub` your identity provider puts in this person's tokens");
    }
    match store.federated.link_federated(name, issuer, subject, Clock::default().now_ms()).await? {
        Ok(link) => Ok(format!("linked `{}` to subject {} of {}\n", link.principal, link.subject, link.issuer)),
        Err(refusal) => bail!("{refusal}"),
    }
}

pub async fn principal_remove(store: &Repositories, name: &str) -> Result<String> {
    let links = store.federated.federated_identities(Some(name)).await?;
    match store.credentials.remove_principal(name, Clock::default().now_secs()).await? {
        Ok(true) => {
            let mut out = format!("removed principal `{name}` and revoked its tokens\n");
            for link in links {
                out.push_str(&format!(
                    "subject {} of {} may not sign in again until `toolgate principal readmit --issuer {} --subject {}`\n",
                    link.subject, link.issuer, link.issuer, link.subject
                ));
            }
            Ok(out)
        }
        Ok(false) => bail!("no principal `{name}` (`toolgate principal list` shows them)"),
        Err(refusal) => bail!("{refusal}"),
    }
}

/// Lets an IdP subject whose principal was removed sign in again.
pub async fn principal_readmit(store: &Repositories, issuer: &str, subject: &str) -> Result<String> {
    match store.federated.readmit(issuer, subject).await? {
        true => Ok(format!("subject {subject} of {issuer} may sign in again\n")),
        false => bail!("subject {subject} of {issuer} is not blocked: only the subjects of removed principals are"),
    }
}

fn describe(a: &Approval) -> String {
    format!(
        "{}  {:<9} {:<28} by {:<12} args {}{}\n",
        a.id,
        a.status.label(),
        a.definition,
        a.submitter,
        a.canonical_args,
        a.reviewer.as_ref().map(|r| format!("  (reviewed by {r})")).unwrap_or_default()
    )
}

pub async fn approvals_list(store: &Repositories, status: Option<&str>) -> Result<String> {
    let all = store.approvals.approvals(status, None, 0, 1000).await?;
    if all.is_empty() {
        return Ok("no approvals\n".into());
    }
    Ok(all.iter().map(describe).collect())
}

pub async fn approvals_show(store: &Repositories, id: &str) -> Result<String> {
    match store.approvals.approval(id).await? {
        Some(a) => Ok(serde_json::to_string_pretty(&a)? + "\n"),
        None => bail!("no approval `{id}` (`toolgate approvals list` shows them)"),
    }
}

/// The console writes its one audit row at once (there is no writer task to batch for).
struct ImmediateAudit<'a> {
    store: &'a dyn AuditStore,
    rows: std::sync::Mutex<Vec<AuditEvent>>,
}

impl AuditSink for ImmediateAudit<'_> {
    fn record(&self, event: AuditEvent) {
        self.rows.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }
}

/// What the audit row of a decision made here says about who made it: whoever controls the
/// server's data dir may name any reviewer, so this path is break-glass (the console's sign-in
/// with a second factor is the normal one).
const BREAK_GLASS: &str = "break-glass CLI (data dir access; the reviewer is named, not proven)";

/// The break-glass decision, as `--as <principal>`, who must be allowed to review.
pub async fn approvals_decide(
    store: &Repositories,
    id: &str,
    reviewer: &str,
    approve: bool,
    comment: Option<&str>,
) -> Result<String> {
    let Some(p) = store.credentials.principal(reviewer).await? else {
        bail!("no principal `{reviewer}` (`toolgate principal list` shows them)");
    };
    let principal = p.principal();
    let reviewing =
        toolgate_gate::Reviewing::of(&CATALOGUE, store.credentials.as_ref(), store.groups.as_ref(), &principal).await?;
    if !reviewing.is_reviewer() {
        bail!(
            "`{reviewer}`'s roles (fleet-wide or on groups) do not grant {}, so they cannot review",
            CATALOGUE.reviewer
        );
    }
    if approve {
        // A held change is approved with its plans as they are now (docs/instructions.md); with
        // no server at hand, a host sent its plan counts as still planning until it answers.
        crate::plans::bind(store, id, None, None, &|_| true).await.map_err(|e| anyhow::anyhow!("not approved: {e}"))?;
    }
    let audit = ImmediateAudit { store: store.audit.as_ref(), rows: Default::default() };
    let clock = Clock::default();
    let decided = toolgate_gate::review(
        store.approvals.as_ref(),
        &audit,
        &clock,
        Decide { id, reviewer: &reviewing, approve, comment, assurance: BREAK_GLASS },
    )
    .await?;
    let rows = std::mem::take(&mut *audit.rows.lock().unwrap_or_else(|e| e.into_inner()));
    if let Err(err) = audit.store.append(rows.as_slice().into(), true).await {
        eprintln!("warning: the audit row could not be written ({err}): {rows:?}");
    }
    match decided {
        Ok(a) => Ok(format!(
            "{} {} ({} for {}); the submitter may now call it again with approval_id\n",
            if approve { "approved" } else { "rejected" },
            a.id,
            a.definition,
            a.submitter
        )),
        Err(refusal) => bail!("{refusal}"),
    }
}
