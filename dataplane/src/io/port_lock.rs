//! One switch per interface: an exclusive lock a switch holds on each interface it opens as a
//! port, for its whole run.
//!
//! Two switches on one interface both get every frame on their sockets (AF_PACKET, AF_XDP in copy
//! mode) and both forward it: receivers get each frame twice, through two independent sets of
//! impairments, and neither switch's counters mean anything. Nothing in the kernel refuses the
//! second socket (only the fast path's XDP attach would, with EBUSY), so each switch takes an
//! flock(2) on `/run/p4netem/ports/<netns inode>-<interface>` before it opens a port. The file
//! holds the owner's pid and P4Runtime address, which a refused switch names.
//!
//! The kernel releases an flock when the last descriptor of its open file goes, which includes
//! the process dying by SIGKILL or a crash: a lock can never outlive its switch, so there is no
//! stale-lock cleanup. A switch that stops in order deletes its files (one left by a killed switch
//! stays, unlocked, and the next switch on that interface takes it). Deleting a file while holding
//! its lock lets another process lock the deleted file (opened just before); so a lock counts only
//! when its path still names the file locked, and is tried again otherwise.
//!
//! Keyed by the network namespace (the inode of /proc/self/ns/net, the same for every process in
//! it, and not reused while a process in it holds a lock) and the interface's name, not its index:
//! a port whose interface is deleted and created again (io/reopen.rs) keeps its lock,
//! and an interface of the same name in another namespace is another interface.
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Where the locks are: a tmpfs a reboot empties (next to the labs' records, /run/p4netem/labs).
pub const DIR: &str = "/run/p4netem/ports";

/// A held lock: released when dropped (its file deleted, then closed) or when the process ends.
#[derive(Debug)]
pub struct PortLock {
    _file: File,
    path: PathBuf,
}

impl Drop for PortLock {
    fn drop(&mut self) {
        // Still locked here: the file closes after this body.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why a lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it: what its file says of it (None: not written yet, or unreadable).
    Held { owner: Option<Owner> },
    /// The lock could not be tried (no /run, read-only, not permitted): anything but "held".
    Unavailable(io::Error),
}

/// The holder of a lock, as written in its file: `pid <n>` and `p4runtime <addr>` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub p4runtime: Option<String>,
}

impl Owner {
    fn to_text(&self) -> String {
        match &self.p4runtime {
            Some(addr) => format!("pid {}\np4runtime {addr}\n", self.pid),
            None => format!("pid {}\n", self.pid),
        }
    }

    fn parse(text: &str) -> Option<Owner> {
        let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')).map(str::trim);
        let pid = field("pid")?.parse().ok()?;
        Some(Owner { pid, p4runtime: field("p4runtime").map(str::to_string) })
    }
}

/// This process's network namespace: the inode of /proc/self/ns/net.
pub fn netns_id() -> io::Result<u64> {
    Ok(std::fs::metadata("/proc/self/ns/net")?.ino())
}

/// The lock file of interface `ifname` in namespace `netns` under `dir`. (An interface name has
/// no '/' and is not "." or "..", the kernel's dev_valid_name, so it is a file name as it is.)
pub fn path(dir: &Path, netns: u64, ifname: &str) -> PathBuf {
    dir.join(format!("{netns}-{ifname}"))
}

/// Takes the lock of interface `ifname` in namespace `netns` under `dir` (created if missing), without
/// waiting, and writes `owner` into its file.
pub fn lock(dir: &Path, netns: u64, ifname: &str, owner: &Owner) -> Result<PortLock, LockError> {
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).map_err(LockError::Unavailable)?;
    let path = path(dir, netns, ifname);
    // Each retry follows a holder that deleted the file as it stopped; a few are plenty.
    for _ in 0..16 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false) // the holder's pid is in it until the lock is ours
            .mode(0o644)
            .open(&path)
            .map_err(LockError::Unavailable)?;
        if let Some(locked) = lock_opened(file, &path, owner)? {
            return Ok(locked);
        }
    }
    Err(LockError::Unavailable(io::Error::other(format!("{} kept being deleted", path.display()))))
}

/// Locks `file`, opened at `path`, and writes `owner` into it. None: the file was deleted since
/// it was opened (by a holder stopping): its lock locks nothing, open the path again.
fn lock_opened(mut file: File, path: &Path, owner: &Owner) -> Result<Option<PortLock>, LockError> {
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(LockError::Unavailable(e));
        }
        return Err(LockError::Held { owner: read_owner(&mut file) });
    }
    let locked = file.metadata().map_err(LockError::Unavailable)?;
    match std::fs::metadata(path) {
        Ok(named) if (named.dev(), named.ino()) == (locked.dev(), locked.ino()) => {}
        _ => return Ok(None),
    }
    // Ours: the previous holder's text goes. A failed write leaves the lock held all the same
    // (a refused switch then says the pid is unknown).
    let _ = file.set_len(0).and_then(|()| file.write_all(owner.to_text().as_bytes()));
    Ok(Some(PortLock { _file: file, path: path.to_path_buf() }))
}

/// The holder's pid and address from its lock file. A holder writes them just after taking the
/// lock, so an empty file is read again for up to 100 ms before giving up.
fn read_owner(file: &mut File) -> Option<Owner> {
    for _ in 0..10 {
        let mut text = String::new();
        if file.rewind().and_then(|()| file.read_to_string(&mut text)).is_ok() {
            if let Some(owner) = Owner::parse(&text) {
                return Some(owner);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

/// The interface's own name when `ifname` is an alternative name of it (`ip link property add
/// altname`), so that both names take one lock; `ifname` itself when there is no such interface
/// (opening the port reports that).
fn canonical_name(ifname: &str) -> String {
    let Ok(cname) = std::ffi::CString::new(ifname) else { return ifname.to_string() };
    // SAFETY: cname is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has the IF_NAMESIZE bytes if_indextoname writes at most.
    if index == 0 || unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) }.is_null() {
        return ifname.to_string();
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into buf.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Locks the interface of every port (`(number, interface)`) for this process, naming `p4runtime`
/// as its address. A port whose interface another process holds fails, naming the interface and
/// that process. When locks cannot be taken here at all (see `LockError::Unavailable`) it warns
/// once and the switch runs without them, as it did before they existed.
pub fn lock_ports<'a>(
    ports: impl IntoIterator<Item = (u16, &'a str)>,
    p4runtime: Option<String>,
) -> anyhow::Result<Vec<PortLock>> {
    let ports: Vec<(u16, &str)> = ports.into_iter().collect();
    if ports.is_empty() {
        return Ok(Vec::new()); // a switch without ports (reading its P4Info) touches nothing
    }
    let owner = Owner { pid: std::process::id(), p4runtime };
    let unavailable = |e: &io::Error| {
        tracing::warn!(
            "port locks unavailable ({e}; in {DIR}): a second p4netem-switch on these interfaces would not be \
             refused, and would forward every frame too (duplicates)"
        )
    };
    let netns = match netns_id() {
        Ok(id) => id,
        Err(e) => {
            unavailable(&e);
            return Ok(Vec::new());
        }
    };
    let dir = Path::new(DIR);
    let mut locked: Vec<(String, PortLock)> = Vec::new();
    for (number, ifname) in ports {
        let name = canonical_name(ifname);
        if locked.iter().any(|(n, _)| *n == name) {
            continue; // two ports on one interface: refused when they are opened, by that name
        }
        match lock(dir, netns, &name, &owner) {
            Ok(l) => locked.push((name, l)),
            Err(LockError::Held { owner }) => {
                let who = match owner {
                    Some(Owner { pid, p4runtime: Some(addr) }) => {
                        format!("p4netem-switch pid {pid} (P4Runtime {addr})")
                    }
                    Some(Owner { pid, p4runtime: None }) => format!("p4netem-switch pid {pid}"),
                    None => format!("another p4netem-switch (its pid is not in {})", path(dir, netns, &name).display()),
                };
                anyhow::bail!(
                    "port {number}: interface {ifname} is already a port of {who} in this network namespace; stop it \
                     first (two switches on one interface both forward every frame)"
                );
            }
            Err(LockError::Unavailable(e)) => {
                unavailable(&e);
                break;
            }
        }
    }
    Ok(locked.into_iter().map(|(_, l)| l).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("p4netem-port-lock-{}-{what}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn me() -> Owner {
        Owner { pid: std::process::id(), p4runtime: Some("127.0.0.1:9559".into()) }
    }

    #[test]
    fn a_held_lock_is_refused_naming_its_holder_until_it_is_dropped() {
        let dir = scratch("held");
        let first = lock(&dir, 7, "veth1", &me()).expect("first lock");
        // Two open files of one path conflict even within one process (flock is per open file).
        match lock(&dir, 7, "veth1", &Owner { pid: 1, p4runtime: None }) {
            Err(LockError::Held { owner }) => assert_eq!(owner, Some(me())),
            other => panic!("expected Held, got {other:?}"),
        }
        // The refused attempt left the holder's text alone.
        let text = std::fs::read_to_string(path(&dir, 7, "veth1")).unwrap();
        assert_eq!(Owner::parse(&text), Some(me()));
        drop(first);
        assert!(!path(&dir, 7, "veth1").exists(), "a lock dropped in order deletes its file");
        let again = Owner { pid: 42, p4runtime: None };
        let _second = lock(&dir, 7, "veth1", &again).expect("free once the holder is gone");
        let text = std::fs::read_to_string(path(&dir, 7, "veth1")).unwrap();
        assert_eq!(text, "pid 42\n", "the new holder's text replaces the old, whole");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_lock_on_a_file_deleted_since_it_was_opened_does_not_count() {
        // A switch that opened the file just before its holder deleted it and stopped: its flock
        // succeeds on the deleted file, which a third switch would never see.
        let dir = scratch("deleted");
        let p = path(&dir, 7, "veth1");
        let holder = lock(&dir, 7, "veth1", &me()).unwrap();
        let opened_before = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        drop(holder);
        assert!(matches!(lock_opened(opened_before, &p, &me()), Ok(None)), "a deleted file's lock counted");
        let _next = lock(&dir, 7, "veth1", &me()).expect("the path's file is free");
        assert!(matches!(lock(&dir, 7, "veth1", &me()), Err(LockError::Held { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_namespace_or_interface_is_another_lock() {
        let dir = scratch("keys");
        let _a = lock(&dir, 7, "veth1", &me()).unwrap();
        let _b = lock(&dir, 8, "veth1", &me()).expect("same name, other namespace");
        let _c = lock(&dir, 7, "veth2", &me()).expect("same namespace, other interface");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_unavailable_not_held() {
        let base = scratch("unavailable");
        std::fs::create_dir_all(&base).unwrap();
        let file = base.join("a-file");
        std::fs::write(&file, b"").unwrap();
        // A path under a regular file cannot be a directory, for root too (ENOTDIR).
        match lock(&file.join("ports"), 7, "veth1", &me()) {
            Err(LockError::Unavailable(_)) => {}
            other => panic!("expected Unavailable, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn owner_text_round_trips_and_garbage_is_none() {
        assert_eq!(Owner::parse(&me().to_text()), Some(me()));
        let bare = Owner { pid: 9, p4runtime: None };
        assert_eq!(Owner::parse(&bare.to_text()), Some(bare));
        assert_eq!(Owner::parse(""), None);
        assert_eq!(Owner::parse("pid x\n"), None);
    }

    #[test]
    fn a_name_with_no_interface_is_its_own_key() {
        assert_eq!(canonical_name("p4n-nonesuch0"), "p4n-nonesuch0");
        assert_eq!(canonical_name("lo"), "lo");
    }
}
