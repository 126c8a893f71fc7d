//! The `radio_profile` table: profile id -> radio (RRC) model parameters (`set_radio`).
//!
//! The radio belongs to the profile, not to a direction: the one state machine of a UE is shared by
//! its uplink and downlink, so there is one entry per profile. Like [`super::Impairment`], the
//! parameters are one immutable, copyable value swapped whole with the snapshot.
use crate::contract::{radio_model, rp};

/// The parameters of `set_radio`, decoded into native types (times in ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RadioParams {
    /// 0 none, 1 UMTS, 2 LTE, 3 GPRS (`contract::radio_model`).
    pub model: u8,
    pub idle_to_dch_ns: u64,
    pub fach_to_dch_ns: u64,
    /// LTE IDLE -> CONNECTED; GPRS IDLE -> READY.
    pub idle_to_connected_ns: u64,
    /// GPRS STANDBY -> READY.
    pub standby_to_ready_ns: u64,
    /// Each promotion lasts its base delay + uniform[0, spread].
    pub promo_spread_ns: u64,
    pub dch_fach_timer_ns: u64,
    pub fach_idle_timer_ns: u64,
    pub drx_inactivity_ns: u64,
    pub short_drx_time_ns: u64,
    pub short_drx_cycle_ns: u64,
    pub long_drx_cycle_ns: u64,
    pub drx_on_ns: u64,
    /// LTE CONNECTED -> IDLE (from the last activity); GPRS STANDBY -> IDLE. 0 = never.
    pub tail_ns: u64,
    /// GPRS READY -> STANDBY.
    pub ready_timer_ns: u64,
    pub rlc_ul_bytes: u32,
    pub rlc_dl_bytes: u32,
    pub fach_ns_per_byte_q16: u64,
    /// Packets that may wait for one promotion (0 = unlimited).
    pub promo_queue_pkts: u32,
}

impl RadioParams {
    /// From `set_radio`'s params in ParamDef order (widths already validated).
    pub fn from_params(p: &[u128]) -> Self {
        let g = |i: usize| p.get(i).copied().unwrap_or(0);
        RadioParams {
            model: g(rp::MODEL) as u8,
            idle_to_dch_ns: g(rp::IDLE_TO_DCH_NS) as u64,
            fach_to_dch_ns: g(rp::FACH_TO_DCH_NS) as u64,
            idle_to_connected_ns: g(rp::IDLE_TO_CONNECTED_NS) as u64,
            standby_to_ready_ns: g(rp::STANDBY_TO_READY_NS) as u64,
            promo_spread_ns: g(rp::PROMO_SPREAD_NS) as u64,
            dch_fach_timer_ns: g(rp::DCH_FACH_TIMER_NS) as u64,
            fach_idle_timer_ns: g(rp::FACH_IDLE_TIMER_NS) as u64,
            drx_inactivity_ns: g(rp::DRX_INACTIVITY_NS) as u64,
            short_drx_time_ns: g(rp::SHORT_DRX_TIME_NS) as u64,
            short_drx_cycle_ns: g(rp::SHORT_DRX_CYCLE_NS) as u64,
            long_drx_cycle_ns: g(rp::LONG_DRX_CYCLE_NS) as u64,
            drx_on_ns: g(rp::DRX_ON_NS) as u64,
            tail_ns: g(rp::TAIL_NS) as u64,
            ready_timer_ns: g(rp::READY_TIMER_NS) as u64,
            rlc_ul_bytes: g(rp::RLC_UL_BYTES) as u32,
            rlc_dl_bytes: g(rp::RLC_DL_BYTES) as u32,
            fach_ns_per_byte_q16: g(rp::FACH_NS_PER_BYTE_Q16) as u64,
            promo_queue_pkts: g(rp::PROMO_QUEUE_PKTS) as u32,
        }
    }

    /// True when the radio stage does something (a known model).
    #[inline]
    pub fn active(&self) -> bool {
        matches!(self.model, radio_model::UMTS | radio_model::LTE | radio_model::GPRS)
    }
}

/// One slot per profile id; `None` = miss (the table's default action applies).
pub struct RadioTable {
    slots: Box<[Option<RadioParams>]>,
    installed: usize,
}

impl RadioTable {
    pub fn new(profiles: usize, entries: impl IntoIterator<Item = (u32, RadioParams)>) -> Self {
        let mut slots = vec![None; profiles].into_boxed_slice();
        let mut installed = 0;
        for (pid, r) in entries {
            if let Some(s) = slots.get_mut(pid as usize) {
                installed += s.is_none() as usize;
                *s = Some(r);
            }
        }
        RadioTable { slots, installed }
    }

    #[inline]
    pub fn get(&self, profile_id: u32) -> Option<&RadioParams> {
        if self.installed == 0 {
            return None; // the common case (no radio anywhere) costs one branch
        }
        self.slots.get(profile_id as usize).and_then(|s| s.as_ref())
    }

    pub fn len(&self) -> usize {
        self.installed
    }

    pub fn is_empty(&self) -> bool {
        self.installed == 0
    }
}
