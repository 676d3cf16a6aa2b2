//! The keep-alive of a held lock's lease, and the report of its loss.

use super::*;
use swaplock_core::etcd::{Answer, KeepAlive};

/// Keeps the lease alive every third of its TTL, until aborted; reports a
/// loss once etcd answers with no time left, or leaves the lease
/// unanswered until its deadline by our clock (counted from when each
/// answered keep-alive was sent, so never later than etcd's own).
pub(super) async fn keep_alive(
    lock: EtcdLock,
    conn: Arc<Conn>,
    lease_id: i64,
    granted_ttl: i64,
    granted: Instant,
    state: Arc<State>,
    lost: watch::Sender<Option<Compromise>>,
) {
    // The core keeps the schedule, the deadline and whose turn it is, in
    // durations since the grant was asked.
    let mut schedule = KeepAlive::new(
        Duration::from_secs(granted_ttl.unsigned_abs()),
        lock.endpoints.len(),
    );
    let since = |t: Instant| t.saturating_duration_since(granted);
    // Where the keep-alive goes: the client of every endpoint at first;
    // after an attempt that failed, each member in turn, by a client of
    // its own, so that a member that froze (whose connection the shared
    // client may keep choosing) is left behind at the next attempt. A
    // member's client that failed is made anew at its next turn, with the
    // credential files as they are then (a certificate renewed on disk).
    let mut members: Vec<Option<Client>> = vec![None; lock.endpoints.len()];
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let why = loop {
        tokio::time::sleep_until(granted + schedule.next()).await;
        let sent = Instant::now();
        let limit = match schedule.send(since(sent), lock.request_timeout) {
            Ok(limit) => granted + limit,
            Err(why) => break why,
        };
        let turn = schedule.member();
        let answer = tokio::time::timeout_at(limit, async {
            let (keeper, answers) = match &mut stream {
                Some(s) => s,
                None => {
                    let mut via = match turn {
                        None => conn.client(),
                        Some(k) => match &members[k] {
                            Some(c) => c.clone(),
                            None => {
                                let c = lock.member(k, conn.as_user).await?;
                                members[k] = Some(c.clone());
                                c
                            }
                        },
                    };
                    // Opening the stream sends the first keep-alive and
                    // reads its answer: the lease was renewed to its whole
                    // TTL (a lease not found is an error).
                    let opened = via.lease_keep_alive(lease_id).await?;
                    return Ok::<_, etcd_client::Error>((Some(granted_ttl), Some(opened)));
                }
            };
            keeper.keep_alive().await?;
            Ok((answers.message().await?.map(|a| a.ttl()), None))
        })
        .await;
        let seen = match answer {
            Ok(Ok((Some(left), opened))) => {
                if opened.is_some() {
                    stream = opened;
                }
                Answer::Left(left)
            }
            // Opening the stream found the lease gone.
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(m))) if m.contains("not found") => {
                Answer::Unknown
            }
            Err(_) => Answer::Silent,
            // The stream broke (a member went away).
            Ok(Ok((None, _)) | Err(_)) => Answer::Broke,
        };
        if matches!(seen, Answer::Silent | Answer::Broke) {
            // Another stream, to the next member.
            stream = None;
            match turn {
                None => {
                    conn.renew(&lock).await;
                }
                Some(k) => members[k] = None,
            }
        }
        if let Some(why) = schedule.answer(since(sent), since(Instant::now()), seen, RETRY_PAUSE) {
            break why;
        }
    };
    let _ = lost.send(Some(why));
    if state.held.load(Ordering::SeqCst) {
        report(&lock, &state, why);
    }
}

/// Records the loss of a held lock's lease and tells the hook, once.
pub(super) fn report(lock: &EtcdLock, state: &State, why: Compromise) {
    {
        let mut seen = crate::sync::lock(&state.compromise);
        if seen.is_some() {
            return;
        }
        *seen = Some(why);
    }
    if let Some(hook) = &lock.on_compromise {
        hook(why);
    }
}
