//! etcd's concurrency recipe, as `etcdctl lock` follows it: the calls
//! that take, check, wait for and release a lock.

use super::*;

/// Deletes `key`.
pub(super) async fn delete(lock: &EtcdLock, conn: &Conn, key: &str) -> io::Result<()> {
    lock.ask(conn, "delete our key", |mut client| async move {
        client.delete(key, None).await
    })
    .await
    .map(drop)
}

/// Revokes lease `id`.
pub(super) async fn revoke(lock: &EtcdLock, conn: &Conn, id: i64) -> io::Result<()> {
    lock.ask(conn, "revoke our lease", |mut client| async move {
        client.lease_revoke(id).await
    })
    .await
    .map(drop)
}

/// Reads `key`.
pub(super) async fn read(
    lock: &EtcdLock,
    conn: &Conn,
    key: &str,
) -> io::Result<etcd_client::GetResponse> {
    lock.ask(conn, "read our key", |mut client| async move {
        client.get(key, None).await
    })
    .await
}

/// Deletes our key and revokes our lease (as `Mutex.Unlock` then
/// `Session.Close` do).
pub(super) async fn release(lock: &EtcdLock, conn: &Conn, taken: &Taken) -> io::Result<()> {
    // Both at once: either releases, and a request held up by a member
    // that froze does not hold up the other.
    let (deleted, revoked) = tokio::join!(
        delete(lock, conn, &taken.key),
        revoke(lock, conn, taken.lease_id)
    );
    // A revoked lease takes its key with it: released either way. A
    // lease already gone is no failure either: its key went with it.
    match (deleted, revoked) {
        (_, Ok(())) | (Ok(()), _) => Ok(()),
        (Err(e), Err(_)) => Err(io::Error::new(
            e.kind(),
            format!("{e}; the lock is released when the lease expires"),
        )),
    }
}

/// Whether our key is still ours in etcd: `None` if it is, or if etcd
/// cannot tell now.
pub(super) async fn check(
    lock: &EtcdLock,
    conn: &Conn,
    key: &str,
    created: i64,
) -> Option<Compromise> {
    let found = read(lock, conn, key).await.ok()?;
    let found = found.kvs().first().map(|kv| kv.create_revision());
    swaplock_core::etcd::key_lost(created, found)
}

/// The recipe of `concurrency.Mutex`: put our key unless it exists, then
/// wait until no key created before ours remains.
pub(super) async fn take(
    lock: &EtcdLock,
    conn: &Conn,
    key: &str,
    lease_id: i64,
    wait: Wait,
) -> io::Result<Taken> {
    let prefix = lock.prefix();
    let first = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1);
    let owner = TxnOp::get(prefix.as_str(), Some(first));
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([
            TxnOp::put(key, "", Some(PutOptions::new().with_lease(lease_id))),
            owner.clone(),
        ])
        .or_else([TxnOp::get(key, None), owner]);
    let resp = lock
        .ask(conn, "put our key", |mut client| {
            let txn = txn.clone();
            async move { client.txn(txn).await }
        })
        .await?;
    let header = resp.header().map_or(0, |h| h.revision());
    let answers = resp.op_responses();
    let mine = if resp.succeeded() {
        header
    } else {
        match answers.first() {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map_or(0, |kv| kv.create_revision()),
            _ => 0,
        }
    };
    let holder = match answers.get(1) {
        Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
        _ => None,
    };
    if mine <= 0 {
        return Err(io::Error::other(format!(
            "etcd lock {}: etcd's answer did not show our key {key}",
            lock.name
        )));
    }
    let taken = |revision| Taken {
        key: key.to_owned(),
        lease_id,
        create_revision: mine,
        revision,
    };
    if swaplock_core::etcd::holds(mine, holder) {
        return Ok(taken(header));
    }
    let timeout = match wait {
        Wait::No => {
            let _ = delete(lock, conn, key).await;
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "etcd lock {} is held (the key with create revision {} is first under {prefix})",
                    lock.name,
                    holder.unwrap_or_default()
                ),
            ));
        }
        Wait::Forever => None,
        Wait::Until(deadline) => Some(deadline.saturating_duration_since(Instant::now())),
    };
    let waited = async {
        wait_deletes(lock, conn, &prefix, mine - 1).await?;
        // Our key must still be there: a lease lost while we waited took it.
        loop {
            match read(lock, conn, key).await {
                Ok(g) => {
                    let header = g.header().map_or(0, |h| h.revision());
                    return match g.kvs().first() {
                        Some(kv) if kv.create_revision() == mine => Ok(taken(header)),
                        _ => Err(io::Error::other(format!(
                            "etcd lock {}: our key {key} went while we waited (our lease expired?)",
                            lock.name
                        ))),
                    };
                }
                Err(e) if passing(&e) => tokio::time::sleep(RETRY_PAUSE).await,
                Err(e) => return Err(e),
            }
        }
    };
    match timeout {
        None => waited.await,
        Some(t) => tokio::time::timeout(t, waited).await.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "etcd lock {}: still held after {:.1} s{}",
                    lock.name,
                    t.as_secs_f64(),
                    holder.map_or(String::new(), |h| format!(
                        " (by the key with create revision {h} under {prefix}, when we came)"
                    ))
                ),
            ))
        }),
    }
}

/// Waits until no key under `prefix` has a create revision up to `max`:
/// watches the latest of them until it is deleted, and looks again
/// (`waitDeletes` of etcd's recipe). A failed request or a broken watch is
/// tried again, while our lease lives: a restarted member or a new leader
/// never wedges the wait; a refusal (no permission, credentials that do
/// not do) ends it with its error.
pub(super) async fn wait_deletes(
    lock: &EtcdLock,
    conn: &Conn,
    prefix: &str,
    max: i64,
) -> io::Result<()> {
    let last = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Descend)
        .with_max_create_revision(max)
        .with_limit(1);
    loop {
        let resp = match lock
            .ask(conn, "read the keys before ours", |mut client| {
                let last = last.clone();
                async move { client.get(prefix, Some(last)).await }
            })
            .await
        {
            Ok(r) => r,
            Err(e) if passing(&e) => {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let Some(kv) = resp.kvs().first() else {
            return Ok(());
        };
        let before = kv.key().to_vec();
        let from = resp.header().map_or(0, |h| h.revision());
        if !wait_delete(&mut conn.client(), before, from).await {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// Whether a failed request's error may pass with time (etcd out of
/// reach, or slow), rather than be the answer (a refusal).
fn passing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotConnected | io::ErrorKind::TimedOut
    )
}

/// Watches `key` from revision `from` until it is deleted (`true`), or the
/// watch breaks (`false`: look again).
pub(super) async fn wait_delete(client: &mut Client, key: Vec<u8>, from: i64) -> bool {
    let options = WatchOptions::new().with_start_revision(from);
    let watch = tokio::time::timeout(WATCH_LOOK_AGAIN, client.watch(key, Some(options)));
    let Ok(Ok(mut stream)) = watch.await else {
        return false;
    };
    loop {
        let Ok(message) = tokio::time::timeout(WATCH_LOOK_AGAIN, stream.message()).await else {
            // Silent for a while: the member may have frozen; look again.
            return false;
        };
        match message {
            Ok(Some(resp)) => {
                if resp
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
                {
                    return true;
                }
                if resp.canceled() {
                    // Compacted past `from`, or refused: look again.
                    return false;
                }
            }
            Ok(None) | Err(_) => return false,
        }
    }
}
