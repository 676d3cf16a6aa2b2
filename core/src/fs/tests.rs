//! The filesystem judgements, against mount table lines as Linux prints
//! them.

use super::*;

#[test]
fn nfsv4_mounts_and_those_of_no_told_version_may_be_delegated_files() {
    let nfs = |options: &[u8]| Traits {
        nfs: Some(Nfs::from_options(options)),
        ..SERVER_LOCKED
    };
    assert!(delegates_files(&nfs(b"rw,vers=4.2,addr=10.0.0.1")));
    assert!(delegates_files(&nfs(b"rw,vers=4.0")));
    assert!(delegates_files(&nfs(b"rw,addr=10.0.0.1")), "no version");
    assert!(!delegates_files(&nfs(b"rw,vers=3,addr=10.0.0.1")));
    assert!(!delegates_files(&nfs(b"rw,nfsvers=2")));
    assert!(!delegates_files(&SERVER_LOCKED), "not NFS");
}

#[test]
fn families_meet_within_themselves_and_across_where_the_kernel_joins_them() {
    use Family::{Fcntl, Flock};
    for (a, b) in [
        (Fcntl, Fcntl),
        (Flock, Flock),
        (Fcntl, Flock),
        (Flock, Fcntl),
    ] {
        assert!(a.meets(b, false), "{a:?} and {b:?} together");
        assert_eq!(a.meets(b, true), a == b, "{a:?} and {b:?} apart");
    }
}

const SSHFS: &[u8] = b"36 25 0:33 / /mnt/a rw,nosuid,nodev,relatime shared:17 - fuse.sshfs lab:/srv rw,user_id=0,group_id=0\n";
const NFS_NOLOCK: &[u8] =
    b"40 25 0:45 / /mnt/n rw,relatime - nfs4 srv:/x rw,vers=4.2,local_lock=all,addr=10.0.0.1";

#[test]
fn a_mountinfo_line_reads_with_and_without_optional_fields() {
    let m = parse_mountinfo_line(SSHFS).unwrap();
    assert_eq!(m.dev, (0, 33));
    assert_eq!(m.fstype, b"fuse.sshfs");
    assert_eq!(m.mount_options, b"rw,nosuid,nodev,relatime");
    assert_eq!(m.super_options, b"rw,user_id=0,group_id=0");
    let m = parse_mountinfo_line(NFS_NOLOCK).unwrap();
    assert_eq!((m.dev, m.fstype), ((0, 45), &b"nfs4"[..]));
    // No separator, a bad device, a device out of range.
    assert_eq!(parse_mountinfo_line(b"1 2 0:3 / / rw ext4 x rw"), None);
    assert_eq!(parse_mountinfo_line(b"1 2 0x3 / / rw - ext4 x rw"), None);
    assert_eq!(
        parse_mountinfo_line(b"1 2 0:99999999999 / / rw - ext4 x rw"),
        None
    );
    assert_eq!(parse_mountinfo_line(b"1 2 :3 / / rw - ext4 x rw"), None);
    assert_eq!(parse_mountinfo_line(b""), None);
}

#[test]
fn userspace_network_clients_refuse_kernel_locks_and_smbnetfs_soft_ones() {
    let sshfs = traits(magic::FUSE, parse_mountinfo_line(SSHFS).as_ref());
    assert!(sshfs.exists_as_eperm);
    assert_eq!(sshfs.exclusive_create, Support::Yes);
    assert_eq!(
        kernel_lock_refusal(&sshfs, Family::Fcntl),
        Some(Refusal::LocksPerClient)
    );
    assert_eq!(
        kernel_lock_refusal(&sshfs, Family::Flock),
        Some(Refusal::LocksPerClient)
    );
    assert_eq!(soft_lock_refusal(&sshfs), None);

    let line = b"36 25 0:34 / /mnt/s rw - fuse.smbnetfs smbnetfs rw";
    let smb = traits(magic::FUSE, parse_mountinfo_line(line).as_ref());
    assert_eq!(
        soft_lock_refusal(&smb),
        Some(Refusal::ExclusiveCreateNotAtomic)
    );
    assert_eq!(
        kernel_lock_refusal(&smb, Family::Fcntl),
        Some(Refusal::LocksPerClient)
    );

    let line = b"36 25 0:35 / /mnt/r rw - fuse.rclone r: rw";
    let rclone = traits(magic::FUSE, parse_mountinfo_line(line).as_ref());
    assert_eq!(rclone.fcntl, Reach::ThisClient);
    assert_eq!(soft_lock_refusal(&rclone), None);
}

#[test]
fn unnamed_fuse_and_local_filesystems_are_not_refused() {
    let line = b"36 25 0:36 / /mnt/b rw - fuse.bindfs /src rw";
    let bindfs = traits(magic::FUSE, parse_mountinfo_line(line).as_ref());
    assert_eq!(bindfs.fcntl, Reach::Unknown);
    assert_eq!(kernel_lock_refusal(&bindfs, Family::Fcntl), None);
    assert_eq!(soft_lock_refusal(&bindfs), None);
    // A FUSE mount whose entry could not be read: refused, as it might
    // be any client.
    let unseen = traits(magic::FUSE, None);
    assert!(!unseen.seen && bindfs.seen);
    assert_eq!(
        kernel_lock_refusal(&unseen, Family::Fcntl),
        Some(Refusal::CannotTell)
    );
    assert_eq!(soft_lock_refusal(&unseen), Some(Refusal::CannotTell));
    // NFS unseen: its lock options unknown, its create still atomic.
    let nfs = traits(magic::NFS, None);
    assert_eq!(
        kernel_lock_refusal(&nfs, Family::Flock),
        Some(Refusal::CannotTell)
    );
    assert_eq!(soft_lock_refusal(&nfs), None);
    for f_type in [magic::EXT4, magic::TMPFS, 0x1234] {
        let t = traits(f_type, None);
        assert_eq!(t.remote, Support::No);
        assert_eq!(kernel_lock_refusal(&t, Family::Flock), None);
        assert_eq!(soft_lock_refusal(&t), None);
    }
    assert_eq!(traits(magic::EXT4, None).exchange, Support::Yes);
    assert_eq!(traits(0x1234, None).exchange, Support::Unknown);
}

#[test]
fn every_named_magic_has_its_name_and_its_traits() {
    let named = [
        (magic::FUSE, "fuse"),
        (magic::NFS, "nfs"),
        (magic::CIFS, "cifs"),
        (magic::SMB2, "smb3"),
        (magic::SMB, "smbfs"),
        (magic::V9FS, "9p"),
        (magic::CEPH, "ceph"),
        (magic::AFS, "afs"),
        (magic::EXT4, "ext4"),
        (magic::XFS, "xfs"),
        (magic::BTRFS, "btrfs"),
        (magic::TMPFS, "tmpfs"),
        (magic::F2FS, "f2fs"),
        (magic::FAT, "vfat"),
        (magic::EXFAT, "exfat"),
        (magic::OVERLAY, "overlay"),
    ];
    for (f_type, name) in named {
        assert_eq!(magic_name(f_type), Some(name));
    }
    // Servers that keep the locks, but do not say whether they honour
    // them, or an exclusive create, from every client.
    for f_type in [magic::V9FS, magic::AFS] {
        let t = traits(f_type, None);
        assert_eq!((t.remote, t.exchange), (Support::Yes, Support::No));
        assert_eq!((t.fcntl, t.flock), (Reach::Unknown, Reach::Unknown));
        assert_eq!(t.exclusive_create, Support::Unknown);
    }
    let ceph = traits(magic::CEPH, None);
    assert_eq!((ceph.fcntl, ceph.flock), (Reach::AllHosts, Reach::AllHosts));
    assert_eq!(
        (ceph.remote, ceph.exclusive_create),
        (Support::Yes, Support::Yes)
    );
    for f_type in [
        magic::EXT4,
        magic::XFS,
        magic::BTRFS,
        magic::TMPFS,
        magic::F2FS,
    ] {
        assert_eq!(traits(f_type, None), LOCAL);
    }
    assert_eq!(traits(magic::OVERLAY, None).exchange, Support::Unknown);
}

#[test]
fn nfs_and_smb_lock_options_decide_the_reach() {
    let nolock = traits(magic::NFS, parse_mountinfo_line(NFS_NOLOCK).as_ref());
    assert_eq!(
        (nolock.fcntl, nolock.flock),
        (Reach::ThisClient, Reach::ThisClient)
    );
    let line = b"40 25 0:45 / /n rw,relatime - nfs srv:/x rw,vers=3,nolock";
    let v3 = traits(magic::NFS, parse_mountinfo_line(line).as_ref());
    assert_eq!(v3.fcntl, Reach::ThisClient);
    let line = b"40 25 0:45 / /n rw - nfs4 srv:/x rw,vers=4.1,local_lock=flock";
    let flock_only = traits(magic::NFS, parse_mountinfo_line(line).as_ref());
    assert_eq!(
        (flock_only.fcntl, flock_only.flock),
        (Reach::AllHosts, Reach::ThisClient)
    );
    assert_eq!(kernel_lock_refusal(&flock_only, Family::Fcntl), None);
    let line = b"40 25 0:45 / /n rw - nfs4 srv:/x rw,vers=4.2,local_lock=posix";
    let posix_only = traits(magic::NFS, parse_mountinfo_line(line).as_ref());
    assert_eq!(
        (posix_only.fcntl, posix_only.flock),
        (Reach::ThisClient, Reach::AllHosts)
    );
    let line = b"40 25 0:45 / /n rw - nfs4 srv:/x rw,vers=4.2,local_lock=none";
    let shared = traits(magic::NFS, parse_mountinfo_line(line).as_ref());
    assert_eq!(
        (shared.fcntl, shared.exchange),
        (Reach::AllHosts, Support::No)
    );
    assert_eq!(shared.exclusive_create, Support::Yes);
    let line = b"40 25 0:45 / /n rw - nfs srv:/x rw,vers=2";
    let v2 = traits(magic::NFS, parse_mountinfo_line(line).as_ref());
    assert_eq!(
        soft_lock_refusal(&v2),
        Some(Refusal::ExclusiveCreateNotAtomic)
    );

    let line = b"50 25 0:50 / /c rw - cifs //srv/x rw,vers=3.1.1,nobrl";
    let nobrl = traits(magic::CIFS, parse_mountinfo_line(line).as_ref());
    assert_eq!(
        kernel_lock_refusal(&nobrl, Family::Fcntl),
        Some(Refusal::LocksPerClient)
    );
    assert_eq!(
        kernel_lock_refusal(&nobrl, Family::Flock),
        Some(Refusal::LocksPerClient)
    );
    assert_eq!(nobrl.local_locks_by, Some("nobrl"));
    assert_eq!(soft_lock_refusal(&nobrl), Some(Refusal::DeletesPending));
    let line = b"50 25 0:50 / /c rw - smb3 //srv/x rw,vers=3.1.1";
    let brl = traits(magic::SMB2, parse_mountinfo_line(line).as_ref());
    assert_eq!(kernel_lock_refusal(&brl, Family::Flock), None);
    assert_eq!(brl.local_locks_by, None);
    assert!(brl.deletes_pending && !v3.deletes_pending);
    assert_eq!(ofd_lock_refusal(&brl), Some(Refusal::OfdLocksShared));
    assert_eq!(ofd_lock_refusal(&v3), None);
    assert_eq!(ofd_lock_refusal(&traits(magic::EXT4, None)), None);
    assert_eq!(soft_lock_refusal(&brl), Some(Refusal::DeletesPending));
    assert_eq!(nolock.local_locks_by, Some("local_lock=all"));
    assert_eq!(v3.local_locks_by, Some("nolock"));
    assert_eq!(flock_only.local_locks_by, Some("local_lock=flock"));
    assert_eq!(shared.local_locks_by, None);
    assert!(needs_mount_table(magic::SMB2) && !needs_mount_table(magic::EXT4));
    assert_eq!(magic_name(magic::SMB2), Some("smb3"));
    assert_eq!(magic_name(0x1234), None);
}

#[test]
fn an_nfs_mount_says_its_version_and_how_a_dead_hosts_lock_ends() {
    let nfs = |line: &[u8]| traits(magic::NFS, parse_mountinfo_line(line).as_ref()).nfs;
    let v42 = nfs(b"40 25 0:45 / /n rw - nfs4 srv:/ rw,vers=4.2,rsize=131072,local_lock=none");
    assert_eq!(v42.map(|n| n.version), Some(Some((4, 2))));
    assert_eq!(v42.map(|n| n.dead_host()), Some(DeadHost::AfterLease));
    let v3 = nfs(b"40 25 0:45 / /n rw - nfs srv:/x rw,vers=3,rsize=131072,mountvers=3");
    assert_eq!(v3.map(|n| n.version), Some(Some((3, 0))));
    assert_eq!(v3.map(|n| n.dead_host()), Some(DeadHost::WhenItRestarts));
    let old = nfs(b"40 25 0:45 / /n rw - nfs srv:/x rw,nfsvers=2");
    assert_eq!(old.map(|n| n.dead_host()), Some(DeadHost::WhenItRestarts));
    let unsaid = nfs(b"40 25 0:45 / /n rw - nfs srv:/x rw,vers=x.1,hard");
    assert_eq!(unsaid.map(|n| n.dead_host()), Some(DeadHost::Unknown));
    let unseen = traits(magic::NFS, None).nfs;
    assert_eq!(unseen.map(|n| n.version), Some(None));
    assert_eq!(traits(magic::EXT4, None).nfs, None);
}

#[test]
fn nfs_attribute_caches_and_lookups_are_read_from_the_mount_options() {
    let nfs = |options: &[u8]| Nfs::from_options(options);
    let default = nfs(b"rw,vers=4.2,rsize=131072,local_lock=none,addr=10.0.0.1");
    assert_eq!(
        (
            default.file_attributes,
            default.dir_attributes,
            default.lookups
        ),
        ((3, 60), (30, 60), Lookups::All)
    );
    // actimeo=0 as Linux prints it: each bound.
    let off = nfs(b"rw,vers=3,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,lookupcache=none");
    assert_eq!(
        (off.file_attributes, off.dir_attributes, off.lookups),
        ((0, 0), (0, 0), Lookups::None)
    );
    assert_eq!(nfs(b"rw,noac").file_attributes, (0, 0));
    assert_eq!(nfs(b"rw,actimeo=7").dir_attributes, (7, 7));
    assert_eq!(nfs(b"rw,acregmax=10").file_attributes, (3, 10));
    assert_eq!(nfs(b"rw,lookupcache=pos").lookups, Lookups::Positive);
    // Malformed values leave the defaults; a bare name panics nothing.
    let odd = nfs(b"rw,acregmin=x,lookupcache,acdirmax=");
    assert_eq!(
        (odd.file_attributes, odd.dir_attributes, odd.lookups),
        ((3, 60), (30, 60), Lookups::All)
    );
}
