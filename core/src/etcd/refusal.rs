//! What an etcd member's refusal of a request means for the lock
//! (PROTOCOL 15.1): whether another try may succeed, whether the client
//! must authenticate again first, or whether the refusal is the answer to
//! report, with its cause.
//!
//! etcd answers gRPC statuses whose codes are shared by several causes
//! (`InvalidArgument` is a wrong password, an empty user name and a stale
//! token alike), so the message decides, as etcd's own client decides by
//! its `rpctypes` errors; the texts are etcd 3.4's and 3.5's
//! (`api/v3rpc/rpctypes/error.go`), which are the same.

/// gRPC status codes (`google.golang.org/grpc/codes`).
mod code {
    pub(super) const CANCELLED: i32 = 1;
    pub(super) const UNKNOWN: i32 = 2;
    pub(super) const PERMISSION_DENIED: i32 = 7;
    pub(super) const FAILED_PRECONDITION: i32 = 9;
    pub(super) const UNAVAILABLE: i32 = 14;
    pub(super) const UNAUTHENTICATED: i32 = 16;
}

/// A refusal's cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Refusal {
    /// No member could be reached, or the one reached had no leader or was
    /// stopping, or the connection closed under the request: another try
    /// may reach a member that answers.
    Unreachable,
    /// The user's roles grant no permission on a key the request names.
    PermissionDenied,
    /// The user name or password is wrong (etcd does not say which).
    BadCredentials,
    /// Authentication is on and the request carried no user: neither a
    /// token nor a client certificate whose common name names one.
    NoUser,
    /// A user was given, but the cluster has authentication off.
    AuthNotEnabled,
    /// The token has expired, or the member does not know it (a restarted
    /// member forgets `simple` tokens): authenticate again, then retry.
    TokenExpired,
    /// The token predates a change of users or roles: authenticate again,
    /// then retry.
    OldAuthRevision,
    /// Anything else: the request itself was refused.
    Other,
}

/// What to do after a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Next {
    /// Make the request again (within its deadline).
    Retry,
    /// Authenticate again, then make the request again.
    Reauthenticate,
    /// Report the refusal: trying again cannot change it.
    Report,
}

impl Refusal {
    /// What to do next.
    pub fn next(self) -> Next {
        match self {
            Refusal::Unreachable => Next::Retry,
            Refusal::TokenExpired | Refusal::OldAuthRevision => Next::Reauthenticate,
            Refusal::PermissionDenied
            | Refusal::BadCredentials
            | Refusal::NoUser
            | Refusal::AuthNotEnabled
            | Refusal::Other => Next::Report,
        }
    }
}

/// The cause of a refusal with gRPC status `code` and `message`.
pub fn refusal(code: i32, message: &str) -> Refusal {
    let said = |text: &str| message.contains(text);
    match code {
        code::UNAVAILABLE | code::CANCELLED => Refusal::Unreachable,
        code::PERMISSION_DENIED => Refusal::PermissionDenied,
        code::UNAUTHENTICATED => Refusal::TokenExpired,
        // The client's own word for a connection that broke under the
        // request (hyper's I/O error, a TLS alert the facade did not
        // judge first).
        code::UNKNOWN if message == "transport error" => Refusal::Unreachable,
        _ if said("etcdserver: invalid auth token") => Refusal::TokenExpired,
        _ if said("etcdserver: revision of auth store is old") => Refusal::OldAuthRevision,
        _ if said("etcdserver: authentication failed") => Refusal::BadCredentials,
        _ if said("etcdserver: user name is empty") => Refusal::NoUser,
        _ if said("etcdserver: authentication is not enabled") => Refusal::AuthNotEnabled,
        // A user that the token or certificate names, gone from the
        // cluster: as a wrong user name.
        code::FAILED_PRECONDITION if said("etcdserver: user name not found") => {
            Refusal::BadCredentials
        }
        _ => Refusal::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcds_own_answers_are_told_apart_by_their_text() {
        // As etcd 3.4.23 answered them in tests/etcd's secured cluster.
        let cases = [
            (
                3,
                "etcdserver: authentication failed, invalid user ID or password",
                Refusal::BadCredentials,
            ),
            (
                7,
                "etcdserver: permission denied",
                Refusal::PermissionDenied,
            ),
            (3, "etcdserver: user name is empty", Refusal::NoUser),
            (
                9,
                "etcdserver: authentication is not enabled",
                Refusal::AuthNotEnabled,
            ),
            (16, "etcdserver: invalid auth token", Refusal::TokenExpired),
            // Lock and Election lose the code and keep the text.
            (2, "etcdserver: invalid auth token", Refusal::TokenExpired),
            (
                3,
                "etcdserver: revision of auth store is old",
                Refusal::OldAuthRevision,
            ),
            (
                9,
                "etcdserver: user name not found",
                Refusal::BadCredentials,
            ),
            (
                9,
                "etcdserver: root user does not have root role",
                Refusal::Other,
            ),
            (16, "unauthenticated", Refusal::TokenExpired),
            (14, "etcdserver: no leader", Refusal::Unreachable),
            (14, "tcp connect error", Refusal::Unreachable),
            (1, "operation was canceled", Refusal::Unreachable),
            (2, "transport error", Refusal::Unreachable),
            (3, "etcdserver: key is not provided", Refusal::Other),
            (5, "etcdserver: requested lease not found", Refusal::Other),
        ];
        for (code, message, cause) in cases {
            assert_eq!(refusal(code, message), cause, "{code} {message}");
        }
    }

    #[test]
    fn only_a_member_out_of_reach_is_tried_again_and_a_stale_token_renewed() {
        assert_eq!(Refusal::Unreachable.next(), Next::Retry);
        assert_eq!(Refusal::TokenExpired.next(), Next::Reauthenticate);
        assert_eq!(Refusal::OldAuthRevision.next(), Next::Reauthenticate);
        for cause in [
            Refusal::PermissionDenied,
            Refusal::BadCredentials,
            Refusal::NoUser,
            Refusal::AuthNotEnabled,
            Refusal::Other,
        ] {
            assert_eq!(cause.next(), Next::Report, "{cause:?}");
        }
    }
}
