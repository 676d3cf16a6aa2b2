//! The keep-alive of a held lock's lease, and the report of its loss.

use super::*;

/// Keeps the lease alive every third of its TTL, until aborted; reports a
/// loss once etcd answers with no time left, or leaves the lease
/// unanswered until its deadline by our clock (counted from when each
/// answered keep-alive was sent, so never later than etcd's own).
pub(super) async fn keep_alive(
    lock: EtcdLock,
    client: Client,
    lease_id: i64,
    granted_ttl: i64,
    granted: Instant,
    state: Arc<State>,
    lost: watch::Sender<Option<Compromise>>,
) {
    let ttl = Duration::from_secs(granted_ttl.unsigned_abs());
    let period = ttl / 3;
    // Where the keep-alive goes: the client of every endpoint at first;
    // after an attempt that failed, each member in turn, by a client of
    // its own, so that a member that froze (whose connection the shared
    // client may keep choosing) is left behind at the next attempt.
    let mut turn: Option<usize> = None;
    let mut members: Vec<Option<Client>> = vec![None; lock.endpoints.len()];
    let mut deadline = granted + ttl;
    let mut next = granted + period;
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let why = loop {
        tokio::time::sleep_until(next).await;
        let sent = Instant::now();
        // Past the deadline (we were stopped, or etcd was away): the lease
        // may be another's by now, and the holder must hear it at once,
        // not after one more request.
        if sent >= deadline {
            break Compromise::Unreachable;
        }
        // One answer is awaited at most half a period (or a third of the
        // request timeout): a member answers a keep-alive in milliseconds,
        // and one that froze leaves time for two others before the
        // deadline; the stream is then opened anew, on another.
        let limit = deadline.min(sent + (period / 2).min(lock.request_timeout / 3));
        let answer = tokio::time::timeout_at(limit, async {
            let (keeper, answers) = match &mut stream {
                Some(s) => s,
                None => {
                    let mut via = match turn {
                        None => client.clone(),
                        Some(k) => match &members[k] {
                            Some(c) => c.clone(),
                            None => {
                                let c = lock.connect_to(&lock.endpoints[k..=k]).await?;
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
        let expired = match &answer {
            Ok(Ok((Some(left), _))) => *left <= 0,
            // Opening the stream found the lease gone.
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(m))) => m.contains("not found"),
            _ => false,
        };
        if expired {
            break Compromise::LeaseExpired;
        }
        match answer {
            Err(_) if Instant::now() >= deadline => break Compromise::Unreachable,
            Err(_) => {
                // No answer within the limit: another stream, soon, to
                // the next member.
                stream = None;
                turn = Some(turn.map_or(0, |k| (k + 1) % members.len()));
                next = Instant::now();
            }
            Ok(Ok((Some(left), opened))) => {
                if opened.is_some() {
                    stream = opened;
                }
                deadline = sent + Duration::from_secs(left.unsigned_abs());
                next = sent + period;
            }
            Ok(Ok((None, _)) | Err(_)) => {
                // The stream broke (a member went away): open another
                // soon, to the next member.
                stream = None;
                turn = Some(turn.map_or(0, |k| (k + 1) % members.len()));
                next = Instant::now() + RETRY_PAUSE.min(period);
            }
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
