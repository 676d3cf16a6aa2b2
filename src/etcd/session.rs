//! The session of a lock: its runtime, and the thread that connects,
//! acquires, keeps the lease alive and releases, retrying where another
//! member may answer.

use super::*;

pub(super) fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Runs `work` to its end on a runtime of a thread of its own (so that a
/// caller inside a runtime is not refused).
pub(super) fn on_runtime<T: Send + 'static>(
    work: impl Future<Output = io::Result<T>> + Send + 'static,
) -> io::Result<T> {
    crate::sync::thread::scope(|s| {
        s.spawn(|| runtime()?.block_on(work))
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the etcd lock's thread panicked")))
    })
}

/// The lock's thread: takes the lock (keeping the lease alive meanwhile),
/// answers the guard's orders, and releases.
pub(super) async fn session(
    lock: EtcdLock,
    wait: Wait,
    state: Arc<State>,
    reply: mpsc::Sender<io::Result<Taken>>,
    mut orders: amsc::UnboundedReceiver<Order>,
) {
    let conn = match lock.connect().await {
        Ok(c) => c,
        Err(e) => {
            let _ = reply.send(Err(e));
            return;
        }
    };
    // A lease lost while we wait (etcd out of reach for a whole TTL, say
    // while a new leader is elected) costs us our place in line, never the
    // wait: we held nothing, so a new lease queues us again, within the
    // same deadline.
    let (keeper, key, taken, lost) = loop {
        // The lease's deadline counts from before the grant was asked for.
        let asked = Instant::now();
        let (lease_id, granted_ttl) = match lock
            .ask(&conn, "grant a lease", |mut client| {
                let ttl = lock.ttl_seconds();
                async move { client.lease_grant(ttl, None).await }
            })
            .await
        {
            Ok(l) if l.ttl() > 0 => (l.id(), l.ttl()),
            Ok(l) => {
                let _ = reply.send(Err(io::Error::other(format!(
                    "etcd lock {}: etcd granted no lease: {}",
                    lock.name,
                    l.error()
                ))));
                return;
            }
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let (lost_tx, mut lost) = watch::channel(None);
        let keeper = tokio::spawn(keep_alive(
            lock.clone(),
            Arc::clone(&conn),
            lease_id,
            granted_ttl,
            asked,
            Arc::clone(&state),
            lost_tx,
        ));
        let key = format!("{}{:x}", lock.prefix(), lease_id);
        let (taken, lost_first) = tokio::select! {
            taken = take(&lock, &conn, &key, lease_id, wait) => (taken, false),
            why = lost.wait_for(Option::is_some) => (Err(io::Error::other(format!(
                "etcd lock {}: our lease {lease_id:x} was lost while we waited ({:?})",
                lock.name,
                why.ok().and_then(|w| *w)
            ))), true),
        };
        match taken {
            Ok(t) => break (keeper, key, t, lost),
            Err(e) => {
                keeper.abort();
                // Leave no key behind to hold up the contenders after us.
                let _ = delete(&lock, &conn, &key).await;
                let _ = revoke(&lock, &conn, lease_id).await;
                let time_left = match wait {
                    Wait::No => false,
                    Wait::Forever => true,
                    Wait::Until(deadline) => Instant::now() < deadline,
                };
                if lost_first && time_left {
                    continue;
                }
                let _ = reply.send(Err(e));
                return;
            }
        }
    };
    // From here the lease is the hold's: its loss is reported.
    state.held.store(true, Ordering::SeqCst);
    let lost_already = *lost.borrow();
    if let Some(why) = lost_already {
        report(&lock, &state, why);
    }
    let created = taken.create_revision;
    if reply.send(Ok(taken.clone())).is_err() {
        keeper.abort();
        let _ = release(&lock, &conn, &taken).await;
        return;
    }
    while let Some(order) = orders.recv().await {
        match order {
            Order::Check(tell) => {
                let found = check(&lock, &conn, &key, created).await;
                let _ = tell.send(found);
            }
            Order::Release(tell) => {
                keeper.abort();
                let _ = tell.send(release(&lock, &conn, &taken).await);
                return;
            }
        }
    }
    // The guard went without a word (it cannot: its drop releases).
    keeper.abort();
    let _ = release(&lock, &conn, &taken).await;
}
