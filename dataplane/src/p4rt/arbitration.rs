//! Client arbitration (P4Runtime spec, "Client Arbitration and Controller Replication").
//!
//! Pure bookkeeping, no I/O: the stream handler feeds it arbitration updates and disconnects, and
//! sends the `Notice`s it returns. Per (device_id, role):
//! - a controller becomes (or stays) primary when its election id is >= the highest election id
//!   ever seen for that group; everybody else is a backup;
//! - election ids must be unique among the live controllers of a group;
//! - when the primary's stream closes, the group has no primary until some controller sends an
//!   update with an election id >= the highest ever seen (the spec does not promote the next
//!   highest backup automatically: a stale backup must not take over without saying so);
//! - the highest election id is remembered for the lifetime of the server, even after every
//!   controller has left.
//!
//! Notifications follow the spec's rules: every change of primary (new primary, downgrade,
//! disconnect) is announced to all controllers of the group; an update that leaves a backup a
//! backup is answered to that controller only. A notice carries the highest election id seen
//! (unset if there never was a primary) and OK for the primary, ALREADY_EXISTS for backups while a
//! primary exists, NOT_FOUND for everyone when there is none.

use std::collections::{BTreeMap, HashMap};

use super::error::{P4Error, P4Result};

/// Identifies one StreamChannel.
pub type ClientId = u64;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub device_id: u64,
    pub role: String,
}

/// What a notice tells its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The receiver is the primary (status OK).
    Primary,
    /// Another controller is primary (status ALREADY_EXISTS).
    Backup,
    /// Nobody is primary (status NOT_FOUND).
    NoPrimary,
}

/// A MasterArbitrationUpdate the server must send to one controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub to: ClientId,
    pub key: GroupKey,
    /// Highest election id seen for the group; None if there never was a primary.
    pub election_id: Option<u128>,
    pub standing: Standing,
}

#[derive(Default, Debug)]
struct Group {
    /// Live controllers and their election ids (None = unset, lower than any id).
    members: BTreeMap<ClientId, Option<u128>>,
    primary: Option<ClientId>,
    /// Highest election id ever held by a primary of this group.
    highest: Option<u128>,
}

#[derive(Default, Debug)]
pub struct Arbiter {
    groups: HashMap<GroupKey, Group>,
    bound: HashMap<ClientId, GroupKey>,
}

impl Arbiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Handle a MasterArbitrationUpdate from `client`. The caller has already checked that the
    /// device exists and that the role is acceptable. An error means the stream must be terminated
    /// with that status.
    pub fn update(&mut self, client: ClientId, key: GroupKey, election: Option<u128>) -> P4Result<Vec<Notice>> {
        if let Some(bound) = self.bound.get(&client) {
            if bound.device_id != key.device_id {
                return Err(P4Error::failed_precondition(format!(
                    "this stream is arbitrated for device {}, got device {}; open a new stream for another device",
                    bound.device_id, key.device_id
                )));
            }
            if bound.role != key.role {
                return Err(P4Error::failed_precondition(format!(
                    "this stream has role {:?}, got role {:?}; open a new stream to change role",
                    bound.role, key.role
                )));
            }
        }
        let group = self.groups.entry(key.clone()).or_default();
        if let Some(e) = election {
            if group.members.iter().any(|(&c, &id)| c != client && id == Some(e)) {
                return Err(P4Error::invalid(format!(
                    "election id {e} is already used by another controller for device {} role {:?}",
                    key.device_id, key.role
                )));
            }
        }
        let was_primary = group.primary == Some(client);
        group.members.insert(client, election);
        self.bound.insert(client, key.clone());

        let becomes_primary = matches!(election, Some(e) if group.highest.is_none_or(|h| e >= h));
        if becomes_primary {
            group.primary = Some(client);
            group.highest = election;
            // Everybody hears about it; the new primary last (the spec's order).
            let mut to: Vec<ClientId> = group.members.keys().copied().filter(|&c| c != client).collect();
            to.push(client);
            Ok(notices(&key, group, &to))
        } else if was_primary {
            // The primary downgraded itself: the group is now without a primary.
            group.primary = None;
            let to: Vec<ClientId> = group.members.keys().copied().collect();
            Ok(notices(&key, group, &to))
        } else {
            Ok(notices(&key, group, &[client]))
        }
    }

    /// The stream of `client` closed. Returns the notices for the remaining controllers.
    pub fn remove(&mut self, client: ClientId) -> Vec<Notice> {
        let Some(key) = self.bound.remove(&client) else {
            return Vec::new();
        };
        let Some(group) = self.groups.get_mut(&key) else {
            return Vec::new();
        };
        group.members.remove(&client);
        if group.primary == Some(client) {
            group.primary = None;
            let to: Vec<ClientId> = group.members.keys().copied().collect();
            notices(&key, group, &to)
        } else {
            Vec::new()
        }
    }

    /// Whether (key, election) identifies the current primary, i.e. may write.
    pub fn is_primary(&self, key: &GroupKey, election: Option<u128>) -> bool {
        let Some(group) = self.groups.get(key) else {
            return false;
        };
        match (group.primary, election) {
            (Some(p), Some(e)) => group.members.get(&p) == Some(&Some(e)),
            _ => false,
        }
    }

    /// The primary client's stream, if there is a primary.
    pub fn primary(&self, key: &GroupKey) -> Option<ClientId> {
        self.groups.get(key).and_then(|g| g.primary)
    }

    /// Whether `client` is the primary of the group its stream is bound to.
    pub fn client_is_primary(&self, client: ClientId) -> bool {
        self.bound.get(&client).and_then(|k| self.groups.get(k)).is_some_and(|g| g.primary == Some(client))
    }

    /// The group a stream is bound to (after its first successful arbitration update).
    pub fn binding(&self, client: ClientId) -> Option<&GroupKey> {
        self.bound.get(&client)
    }
}

fn notices(key: &GroupKey, group: &Group, to: &[ClientId]) -> Vec<Notice> {
    to.iter()
        .map(|&c| Notice {
            to: c,
            key: key.clone(),
            election_id: group.highest,
            standing: match group.primary {
                Some(p) if p == c => Standing::Primary,
                Some(_) => Standing::Backup,
                None => Standing::NoPrimary,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn key() -> GroupKey {
        GroupKey { device_id: 1, role: String::new() }
    }
    fn n(to: ClientId, e: Option<u128>, s: Standing) -> Notice {
        Notice { to, key: key(), election_id: e, standing: s }
    }

    #[test]
    fn first_controller_becomes_primary() {
        let mut a = Arbiter::new();
        assert_eq!(a.update(1, key(), Some(10)).unwrap(), vec![n(1, Some(10), Standing::Primary)]);
        assert!(a.is_primary(&key(), Some(10)));
        assert!(!a.is_primary(&key(), Some(9)));
        assert!(!a.is_primary(&key(), None));
        assert_eq!(a.primary(&key()), Some(1));
    }

    #[test]
    fn lower_backup_is_told_only_itself() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        assert_eq!(a.update(2, key(), Some(5)).unwrap(), vec![n(2, Some(10), Standing::Backup)]);
        assert!(!a.is_primary(&key(), Some(5)));
        assert!(a.is_primary(&key(), Some(10)));
    }

    #[test]
    fn higher_controller_takes_over_and_old_primary_is_notified() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        a.update(2, key(), Some(5)).unwrap();
        let got = a.update(3, key(), Some(20)).unwrap();
        assert_eq!(
            got,
            vec![n(1, Some(20), Standing::Backup), n(2, Some(20), Standing::Backup), n(3, Some(20), Standing::Primary)]
        );
        assert!(!a.is_primary(&key(), Some(10)));
        assert!(a.is_primary(&key(), Some(20)));
    }

    #[test]
    fn duplicate_election_id_is_invalid_argument() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        let e = a.update(2, key(), Some(10)).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        // The rejected client is not a member.
        assert_eq!(a.remove(2), vec![]);
        // Re-sending one's own id is fine.
        assert_eq!(a.update(1, key(), Some(10)).unwrap(), vec![n(1, Some(10), Standing::Primary)]);
        // The same id in another role or device is fine.
        let other = GroupKey { device_id: 2, role: String::new() };
        assert!(a.update(3, other, Some(10)).is_ok());
    }

    #[test]
    fn primary_disconnect_leaves_no_primary_until_a_high_enough_update() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        a.update(2, key(), Some(5)).unwrap();
        a.update(3, key(), Some(7)).unwrap();
        assert_eq!(a.remove(1), vec![n(2, Some(10), Standing::NoPrimary), n(3, Some(10), Standing::NoPrimary)]);
        assert_eq!(a.primary(&key()), None);
        assert!(!a.is_primary(&key(), Some(7)));
        // Re-sending a lower id keeps it a backup; it hears NOT_FOUND alone.
        assert_eq!(a.update(3, key(), Some(7)).unwrap(), vec![n(3, Some(10), Standing::NoPrimary)]);
        // Equal to the highest ever seen is enough.
        assert_eq!(
            a.update(2, key(), Some(10)).unwrap(),
            vec![n(3, Some(10), Standing::Backup), n(2, Some(10), Standing::Primary)]
        );
        assert!(a.is_primary(&key(), Some(10)));
    }

    #[test]
    fn backup_disconnect_is_silent() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        a.update(2, key(), Some(5)).unwrap();
        assert_eq!(a.remove(2), vec![]);
        assert_eq!(a.remove(2), vec![]);
        assert!(a.is_primary(&key(), Some(10)));
    }

    #[test]
    fn highest_id_survives_everyone_leaving() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        a.remove(1);
        assert_eq!(a.update(2, key(), Some(9)).unwrap(), vec![n(2, Some(10), Standing::NoPrimary)]);
    }

    #[test]
    fn primary_downgrade_is_announced_to_all() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        a.update(2, key(), Some(5)).unwrap();
        assert_eq!(
            a.update(1, key(), Some(3)).unwrap(),
            vec![n(1, Some(10), Standing::NoPrimary), n(2, Some(10), Standing::NoPrimary)]
        );
        assert_eq!(a.primary(&key()), None);
    }

    #[test]
    fn unset_election_id_never_becomes_primary() {
        let mut a = Arbiter::new();
        assert_eq!(a.update(1, key(), None).unwrap(), vec![n(1, None, Standing::NoPrimary)]);
        assert_eq!(a.primary(&key()), None);
        // Two unset ids do not collide.
        assert!(a.update(2, key(), None).is_ok());
        // Zero is a real id, higher than unset.
        assert_eq!(
            a.update(3, key(), Some(0)).unwrap(),
            vec![n(1, Some(0), Standing::Backup), n(2, Some(0), Standing::Backup), n(3, Some(0), Standing::Primary)]
        );
    }

    #[test]
    fn bound_stream_cannot_change_device_or_role() {
        let mut a = Arbiter::new();
        a.update(1, key(), Some(10)).unwrap();
        let e = a.update(1, GroupKey { device_id: 2, role: String::new() }, Some(10)).unwrap_err();
        assert_eq!(e.code, Code::FailedPrecondition);
        let e = a.update(1, GroupKey { device_id: 1, role: "r".into() }, Some(10)).unwrap_err();
        assert_eq!(e.code, Code::FailedPrecondition);
        assert!(a.client_is_primary(1));
    }

    #[test]
    fn groups_are_independent() {
        let mut a = Arbiter::new();
        let k2 = GroupKey { device_id: 1, role: "stats".into() };
        a.update(1, key(), Some(10)).unwrap();
        a.update(2, k2.clone(), Some(1)).unwrap();
        assert!(a.is_primary(&key(), Some(10)));
        assert!(a.is_primary(&k2, Some(1)));
        assert!(!a.is_primary(&k2, Some(10)));
    }
}
