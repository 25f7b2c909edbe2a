//! The change feed on PostgreSQL: writers `NOTIFY toolgate` in their transaction (delivered
//! at commit, never for a rolled-back write); each replica `LISTEN`s on a connection of its
//! own and passes on what other replicas changed. A lost connection is opened again, and
//! listeners are told to resync, since notifications sent meanwhile are gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use deadpool_postgres::GenericClient;
use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use super::{Pg, execute};
use crate::changes::{Change, ChangeFeed};

/// The channel of the deployment whose tables are in `schema`: replicas of one deployment
/// share it, and two deployments in one database (each its own schema) never hear each
/// other. `public` keeps the plain name; others get a digest (a channel is an identifier,
/// at most 63 bytes, and a schema name may be that long itself).
pub(crate) fn channel_for(schema: &str) -> Arc<str> {
    match schema {
        "public" => "toolgate".into(),
        other => {
            let digest = toolgate_domain::secrets::secret_digest(other);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("toolgate_{hex}").into()
        }
    }
}

/// How long to wait before listening again after the connection was lost.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Tells every replica (this one included, which ignores its own) of `change`, when the
/// transaction `c` is in commits.
pub(crate) async fn notify(c: &impl GenericClient, channel: &str, replica: &str, change: &Change) -> Pg<()> {
    let payload = format!("{replica}\t{}", change.encode());
    execute(c, "SELECT pg_notify($1, $2)", &[&channel, &payload]).await.map(drop)
}

/// Listens until the feed is dropped, reconnecting as needed.
pub(crate) fn spawn(config: tokio_postgres::Config, channel: Arc<str>, replica: Arc<str>, feed: Weak<ChangeFeed>) {
    tokio::spawn(async move {
        let mut first = true;
        loop {
            if !first {
                tokio::time::sleep(RECONNECT_AFTER).await;
            }
            let Some(alive) = feed.upgrade() else { return };
            if !first {
                // Whatever was sent while we were away is lost: read everything again.
                alive.publish(Change::Resync);
            }
            drop(alive);
            first = false;
            if let Err(e) = listen(&config, &channel, &replica, &feed).await {
                tracing::warn!("the change feed's database connection failed ({e}); listening again in 1 s");
            }
            if feed.strong_count() == 0 {
                return;
            }
        }
    });
}

async fn listen(config: &tokio_postgres::Config, channel: &str, replica: &str, feed: &Weak<ChangeFeed>) -> Pg<()> {
    let (client, mut connection) = config.connect(tokio_postgres::NoTls).await?;
    let (messages, mut heard) = tokio::sync::mpsc::unbounded_channel();
    // The connection delivers notifications only while it is polled: a task of its own.
    let driver = tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if messages.send(n.payload().to_string()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("the change feed's connection: {e}");
                    return;
                }
            }
        }
    });
    // The channel is `toolgate` or `toolgate_<hex>`: nothing to quote.
    client.batch_execute(&format!("LISTEN {channel}")).await?;
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            payload = heard.recv() => {
                let Some(payload) = payload else { break };
                let Some(feed) = feed.upgrade() else { break };
                let Some((origin, text)) = payload.split_once('\t') else { continue };
                if origin == replica {
                    continue;
                }
                match Change::decode(text) {
                    Some(change) => feed.publish(change),
                    None => tracing::warn!("an unknown change notification: {text:?}"),
                }
            }
            // The store was dropped (tests open and drop many): stop listening.
            _ = tick.tick() => if feed.strong_count() == 0 { break },
        }
    }
    driver.abort();
    Ok(())
}
