//! The host name a record carries, computed as filelock's `host_name()`
//! computes it (PROTOCOL 4.1), as a pure function of the raw bytes the OS
//! reports and the PID namespace's inode.
//!
//! Records hold the host to printable, non-space ASCII so that a hostname
//! with a space, a newline or a non-UTF-8 byte can neither forge a record
//! line nor make a holder's record unreadable to itself. The `?pidns-`
//! suffix keeps two containers that share a hostname apart, because a PID
//! recorded in one names another process, or none, in the other.

use sha2::{Digest, Sha256};

/// The longest host field a record carries (the RFC 1123 limit).
pub const HOST_NAME_LIMIT: usize = 253;
/// The inode of the initial PID namespace (`PID_NS_INIT_INO`): a host's own
/// namespace, which adds no suffix.
pub const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;
/// The mark that starts the namespace suffix; no escape can produce it.
pub const NAMESPACE_MARK: &str = "?pidns-";

const DIGEST_LEN: usize = 8;
const KEEP: usize = HOST_NAME_LIMIT - DIGEST_LEN - 1;

/// A host name as records carry it: printable ASCII, at most 253 bytes.
pub type HostName = heapless::String<HOST_NAME_LIMIT>;

fn is_verbatim(byte: u8) -> bool {
    (0x21..=0x7e).contains(&byte) && byte != b'?'
}

/// Visits the escaped name and its namespace suffix piece by piece.
fn pieces(raw: &[u8], pid_namespace: Option<u64>, visit: &mut dyn FnMut(&[u8])) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &byte in raw {
        if is_verbatim(byte) {
            visit(&[byte]);
        } else {
            visit(&[
                b'?',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
        }
    }
    match pid_namespace {
        None | Some(INITIAL_PID_NAMESPACE) => {}
        Some(ino) => {
            visit(NAMESPACE_MARK.as_bytes());
            let mut buf = [0u8; 16];
            let mut at = buf.len();
            let mut v = ino;
            loop {
                at -= 1;
                buf[at] = HEX[(v & 0xf) as usize];
                v >>= 4;
                if v == 0 {
                    break;
                }
            }
            visit(&buf[at..]);
        }
    }
}

/// filelock's `host_name()` for the hostname bytes `raw` (from
/// `gethostname`, or the UTF-8 of the Windows DNS host name) and the inode of
/// `/proc/self/ns/pid` (`None` where that file cannot be read, which counts
/// as the initial namespace; macOS and Windows pass `None`).
///
/// Each byte outside 0x21..=0x7E, and `?`, becomes `?` and two lowercase hex
/// digits; a namespace other than the initial one appends
/// `?pidns-<inode in hex>`; a result over 253 characters keeps its first 244,
/// then `-` and the first 8 hex digits of the SHA-256 of the part cut off; an
/// empty result is `?`.
pub fn host_name(raw: &[u8], pid_namespace: Option<u64>) -> HostName {
    let mut total = 0usize;
    pieces(raw, pid_namespace, &mut |p| total += p.len());
    let mut out: heapless::Vec<u8, HOST_NAME_LIMIT> = heapless::Vec::new();
    if total <= HOST_NAME_LIMIT {
        // Fits: the capacity check cannot fail.
        pieces(raw, pid_namespace, &mut |p| {
            let _ = out.extend_from_slice(p);
        });
    } else {
        let mut hasher = Sha256::new();
        let mut at = 0usize;
        pieces(raw, pid_namespace, &mut |p| {
            let keep = KEEP.saturating_sub(at).min(p.len());
            let _ = out.extend_from_slice(&p[..keep]);
            hasher.update(&p[keep..]);
            at += p.len();
        });
        let digest = hasher.finalize();
        let _ = out.push(b'-');
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for byte in &digest[..DIGEST_LEN / 2] {
            let _ = out.push(HEX[usize::from(byte >> 4)]);
            let _ = out.push(HEX[usize::from(byte & 0xf)]);
        }
    }
    if out.is_empty() {
        let _ = out.push(b'?');
    }
    let mut name = HostName::new();
    // Every byte pushed above is printable ASCII, so this is valid UTF-8
    // and fits the same capacity.
    if let Ok(text) = core::str::from_utf8(&out) {
        let _ = name.push_str(text);
    }
    name
}

/// Whether a recorded host carries a PID-namespace suffix, which only this
/// crate's and filelock's own writers inside a non-initial namespace produce.
pub fn has_namespace_mark(host: &str) -> bool {
    host.contains(NAMESPACE_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_escapes() {
        assert_eq!(host_name(b"vm", None), "vm");
        assert_eq!(host_name(b"my host", None), "my?20host");
        assert_eq!(host_name(b"a?b", None), "a?3fb");
        assert_eq!(host_name("café".as_bytes(), None), "caf?c3?a9");
        assert_eq!(host_name(b"x\nfake", None), "x?0afake");
        assert_eq!(host_name(b"", None), "?");
        assert_eq!(host_name(&[0xff, 0xfe], None), "?ff?fe");
        assert_eq!(host_name(b"vm", Some(0xF000_0152)), "vm?pidns-f0000152");
        assert_eq!(host_name(b"vm", Some(INITIAL_PID_NAMESPACE)), "vm");
        assert_eq!(
            host_name(&[b'a'; 253], None).as_str(),
            core::str::from_utf8(&[b'a'; 253]).unwrap()
        );
    }

    #[test]
    fn observed_digests() {
        let cut = |n: usize, digest: &str| {
            let name = host_name(&[b'a'; 300][..n], None);
            assert_eq!(name.len(), 253);
            assert!(name.as_bytes()[..244].iter().all(|&b| b == b'a'));
            assert_eq!(&name[244..], digest);
        };
        cut(254, "-bf2cb58a");
        cut(300, "-b35439a4");
    }
}
