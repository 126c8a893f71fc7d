//! The data plane's view of the tables: an immutable, compiled [`Snapshot`] published with
//! arc-swap. The control side (`state::TableStore`) keeps the entry lists and compiles the tables a
//! batch touched; everything else is shared with the previous snapshot by `Arc`.
pub mod classifier;
pub mod exact;
pub mod hash;
pub mod profile;
pub mod radio;

use std::sync::Arc;

pub use classifier::{ClassKey, ClassOp, Classifier, Rule};
pub use exact::{MacMap, PortMap};
pub use profile::{Impairment, ProfileTable};
pub use radio::{RadioParams, RadioTable};

/// The forwarding decision of `port_map` / `l2_fwd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    Port(u16),
    Cpu,
    /// `drop_packet`: no route.
    Drop,
}

/// The result of `set_profile` / `set_profile_ue_by_addr`.
///
/// The UE id is `ue_id + (address & ue_mask)`, the address being the IPv4 source or (with
/// `ue_from_dst`) destination: `set_profile` is the case `ue_mask == 0`, so one entry can give
/// each of many hosts its own UE (and radio) without an entry per host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProfileSel {
    pub profile_id: u16,
    pub direction: u8,
    /// `set_profile`'s ue_id, or `set_profile_ue_by_addr`'s ue_base.
    pub ue_id: u32,
    pub ue_mask: u32,
    pub ue_from_dst: bool,
}

impl ProfileSel {
    #[inline]
    pub fn pd(&self) -> u32 {
        (self.profile_id as u32) << 1 | (self.direction as u32 & 1)
    }

    /// The packet's UE id (wrapping like P4's bit<32> addition).
    #[inline]
    pub fn ue(&self, ipv4_src: u32, ipv4_dst: u32) -> u32 {
        if self.ue_mask == 0 {
            return self.ue_id;
        }
        let addr = if self.ue_from_dst { ipv4_dst } else { ipv4_src };
        self.ue_id.wrapping_add(addr & self.ue_mask)
    }
}

/// Everything one packet's pipeline pass reads from the tables.
#[derive(Clone)]
pub struct Snapshot {
    pub port_map: Arc<PortMap>,
    pub port_map_default: Forward,
    /// l2_fwd's default is const NoAction (miss -> port_map).
    pub l2_fwd: Arc<MacMap<Forward>>,
    /// l2_learn entries all run NoAction (learn is @defaultonly): membership is all that matters.
    pub l2_learn: Arc<MacMap<()>>,
    /// Default action of l2_learn is `learn`.
    pub learn_on_miss: bool,
    pub classifier: Arc<Classifier>,
    pub classifier_default: ProfileSel,
    pub profiles: Arc<ProfileTable>,
    /// Default of `profile`: `None` = NoAction (no impairment).
    pub profile_default: Option<Impairment>,
    pub radios: Arc<RadioTable>,
    /// Default of `radio_profile`: `None` = NoAction (no radio).
    pub radio_default: Option<RadioParams>,
    /// The control epoch this snapshot was published under (io/flow_cache.rs): the kernel fast
    /// path's entries decided with it carry it, and stop matching when the next publish bumps it.
    pub epoch: u64,
}

impl Snapshot {
    /// The empty pipeline with the P4 program's default actions.
    pub fn empty(pds: usize) -> Self {
        Self::empty_with(pds, pds / 2)
    }

    /// The empty pipeline for `pds` profile-directions and `profiles` radio slots.
    pub fn empty_with(pds: usize, profiles: usize) -> Self {
        Snapshot {
            port_map: Arc::new(PortMap::new([])),
            port_map_default: Forward::Drop,
            l2_fwd: Arc::new(MacMap::new([])),
            l2_learn: Arc::new(MacMap::new([])),
            learn_on_miss: false,
            classifier: Arc::new(Classifier::build(&[])),
            classifier_default: ProfileSel::default(),
            profiles: Arc::new(ProfileTable::new(pds, [])),
            profile_default: None,
            radios: Arc::new(RadioTable::new(profiles, [])),
            radio_default: None,
            epoch: 0,
        }
    }

    /// The impairment of a pd: its entry, else the table default.
    #[inline]
    pub fn impairment(&self, pd: u32) -> Option<&Impairment> {
        self.profiles.get(pd).or(self.profile_default.as_ref())
    }

    /// The radio model of a profile: its entry, else the table default; `None` = no radio.
    #[inline]
    pub fn radio(&self, profile_id: u32) -> Option<&RadioParams> {
        self.radios.get(profile_id).or(self.radio_default.as_ref()).filter(|r| r.active())
    }
}
