//! The takeover after SIGKILL against the size of the lock's directory
//! (`cargo bench --bench locks -- --scan`): the time from killing a soft
//! lock's holder to a waiting process's return, with 0, 10,000, 100,000
//! and a million other files in the lock's directory (the million in the
//! full run only), beside filelock's classes in the same directory, and
//! each kind's uncontended cycle there.
//!
//! A takeover lists the directory: before it takes a dead writer's marker
//! over, swaplock looks for the records that writer may have stranded
//! under its break names (PROTOCOL 5.3, 7.11), and filelock does the same
//! (`os.scandir`). An uncontended cycle lists nothing.
//!
//! The files are made once, each size adding to the last, by a tight loop
//! of `openat` and `close`: a hard link to one file would do no quicker,
//! and ext4 allows a file 65,000 links.

use crate::curves::short;
use crate::linux::{per_cycle, python, quantile, ratio, soft_lock, takeovers, us};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The files beside the lock, each with its kills: the full run's, the
/// quick run's. filelock's takeover lists the directory at about 30 µs a
/// file, half a minute a kill at a million.
const FULL_SIZES: [(usize, usize); 4] = [(0, 20), (10_000, 20), (100_000, 10), (1_000_000, 3)];
const QUICK_SIZES: [(usize, usize); 2] = [(0, 3), (10_000, 3)];

/// Each soft kind, with filelock's class of that kind.
const KINDS: [(&str, &str); 3] = [
    ("soft", "SoftFileLock"),
    ("marker", "MarkerSoftFileLock"),
    ("lease", "SoftFileLease"),
];

/// Adds files to `dir` until it holds `to` besides the locks' own (`made`
/// of them are there already).
fn grow(dir: &Path, made: &mut usize, to: usize) -> std::io::Result<()> {
    let d = std::fs::File::open(dir)?;
    while *made < to {
        let name = format!("s{:07}\0", *made);
        // SAFETY: plain syscalls on a directory descriptor that outlives
        // them, with a NUL-terminated name; the new descriptor is closed
        // at once.
        unsafe {
            let fd = libc::openat(
                d.as_raw_fd(),
                name.as_ptr().cast(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o644,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fd);
        }
        *made += 1;
    }
    Ok(())
}

/// What filelock's classes did in `dir`: per class, its takeovers
/// (sorted) and its mean cycle.
type Theirs = Vec<(String, Vec<Duration>, Duration)>;

fn filelock(py: &Path, dir: &Path, kills: usize, cycles: u32) -> Result<Theirs, String> {
    let out = Command::new(py)
        .args(["-c", include_str!("scan.py")])
        .arg(dir)
        .arg(kills.to_string())
        .arg(cycles.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!(
            "filelock's takeovers failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let seconds = |w: &str| Duration::from_secs_f64(w.parse().unwrap());
    let mut theirs: Theirs = Vec::new();
    for line in text.lines() {
        let mut words = line.split(' ');
        match (words.next(), words.next()) {
            (Some("takeover"), Some(class)) => {
                let mut t: Vec<Duration> = words.map(seconds).collect();
                t.sort();
                theirs.push((class.to_owned(), t, Duration::ZERO));
            }
            (Some("cycle"), Some(class)) => {
                if let (Some(row), Some(w)) =
                    (theirs.iter_mut().find(|r| r.0 == class), words.next())
                {
                    row.2 = seconds(w);
                }
            }
            _ => {}
        }
    }
    Ok(theirs)
}

/// The scan's table; the exit status.
pub(crate) fn run(root: &Path, quick: bool) -> i32 {
    let (sizes, cycles): (&[(usize, usize)], u32) = if quick {
        (&QUICK_SIZES, 20)
    } else {
        (&FULL_SIZES, 200)
    };
    let dir = root.join("scan");
    std::fs::create_dir(&dir).unwrap();
    let py = python();
    if py.is_none() {
        println!(
            "(filelock's columns are left empty: no Python with filelock 4.2.11; \
             set SWAPLOCK_PYTHON or run scripts/setup)\n"
        );
    }
    let mut lines = Vec::new();
    let mut made = 0;
    for &(size, kills) in sizes {
        let began = Instant::now();
        if let Err(e) = grow(&dir, &mut made, size) {
            eprintln!(
                "cannot make {size} files in {} ({made} made): {e}",
                dir.display()
            );
            return 2;
        }
        eprintln!(
            "scan: {size} files beside the locks, made in {:.1} s",
            began.elapsed().as_secs_f64()
        );
        let theirs = match py.as_deref().map(|py| filelock(py, &dir, kills, cycles)) {
            Some(Err(e)) => {
                eprintln!("{e}");
                return 2;
            }
            Some(Ok(t)) => t,
            None => Vec::new(),
        };
        for (kind, class) in KINDS {
            let path = dir.join(format!("{kind}.lock"));
            let t = takeovers(kind, &path, kills);
            let cycle = per_cycle(cycles, || {
                soft_lock(kind, &path).lock().unwrap().release().unwrap()
            });
            let (their_t, their_cycle, vs_t, vs_cycle) =
                match theirs.iter().find(|(c, t, _)| c == class && !t.is_empty()) {
                    Some((_, tt, tc)) => (
                        format!(
                            "{} / {}",
                            short(quantile(tt, 0.5)),
                            short(quantile(tt, 0.99))
                        ),
                        us(*tc),
                        ratio(quantile(&t, 0.5), quantile(tt, 0.5)),
                        ratio(cycle, *tc),
                    ),
                    None => Default::default(),
                };
            lines.push(format!(
                "| {size} | {kills} | {kind} / `{class}` | {} / {} | {their_t} | {vs_t} | {} | {their_cycle} | {vs_cycle} |",
                short(quantile(&t, 0.5)),
                short(quantile(&t, 0.99)),
                us(cycle),
            ));
        }
    }
    println!("\n## Takeover after SIGKILL against the directory's size (p50 / p99; cycles: {cycles}, mean)\n");
    println!("| files beside the lock | kills | kind / filelock's | takeover | filelock's takeover | vs filelock (p50) | cycle | filelock's cycle | vs filelock |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for l in lines {
        println!("{l}");
    }
    0
}
