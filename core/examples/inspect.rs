//! Prints how each kind of soft lock reads a marker file.
//!
//! ```text
//! cargo run -q -p swaplock-core --example inspect -- path/to/file.lock
//! ```

use std::io::Read;
use swaplock_core::record::{classify, parse_placeholder, Classified, Content, Reader, READ_LIMIT};

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: inspect MARKER_FILE");
        std::process::exit(2);
    };
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) => {
            eprintln!("inspect: {}: {e}", path.to_string_lossy());
            std::process::exit(1);
        }
    };
    let mut bytes = Vec::new();
    let content = if meta.is_file() {
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(READ_LIMIT as u64).read_to_end(&mut bytes));
        if let Err(e) = read {
            eprintln!("inspect: {}: {e}", path.to_string_lossy());
            std::process::exit(1);
        }
        Content::Bytes(&bytes)
    } else {
        Content::NotRegular
    };
    for (reader, name) in [
        (Reader::Protocol1, "SoftFileLock"),
        (Reader::Protocol2, "MarkerSoftFileLock/SoftFileLease"),
    ] {
        let verdict = match classify(content, reader) {
            Classified::Sentinel => "strict sentinel: held forever".to_owned(),
            Classified::Recordless => "empty marker: held forever".to_owned(),
            Classified::V1(r) => format!(
                "protocol 1: pid {} on {:?}{}",
                r.pid,
                r.host,
                r.start.map(|s| format!(", start {s}")).unwrap_or_default()
            ),
            Classified::V2(r) => format!(
                "protocol 2: pid {} on {:?}, mode {:?}{}{}",
                r.pid,
                r.host,
                r.mode.as_str(),
                r.duration
                    .map(|d| format!(", lease {d} s"))
                    .unwrap_or_default(),
                r.start.map(|s| format!(", start {s}")).unwrap_or_default()
            ),
            Classified::Malformed(why) => {
                let breaker = std::str::from_utf8(&bytes).ok().and_then(parse_placeholder);
                match breaker {
                    Some(pid) => {
                        format!("break placeholder of pid {pid}: evicted after 2 s unchanged")
                    }
                    None => format!("malformed ({why}): evicted after 2 s unchanged"),
                }
            }
        };
        println!("{name}: {verdict}");
    }
}
