//! The forwarding-pipeline config as P4Runtime sees it (Set/GetForwardingPipelineConfig).
//!
//! The target is fixed-function: its pipeline is always loaded, so Get returns the target's own
//! P4Info even before any Set, and Set never changes what the data plane does. Set only checks
//! that the pushed P4Info describes this pipeline (`compare.rs`) and keeps the pushed config
//! (P4Info, opaque device config such as a bmv2 JSON, cookie) so that Get returns what was Set.
//!
//! Actions (P4Runtime spec, SetForwardingPipelineConfig):
//! - VERIFY: check only.
//! - VERIFY_AND_SAVE: check and keep as "saved"; forwarding state untouched.
//! - VERIFY_AND_COMMIT: check, make it the running config, and clear the forwarding state.
//! - COMMIT: make the saved config the running one; the writes made since the save already apply
//!   to it (same pipeline), so the forwarding state is kept. No config may be given.
//! - RECONCILE_AND_COMMIT: check and make it running while keeping the forwarding state, which is
//!   always possible for a config that passed the check.

use super::compare::compare;
use super::error::{P4Error, P4Result};
use super::proto::p4::config::v1 as cfg;
use super::proto::p4::v1 as pb;

use pb::get_forwarding_pipeline_config_request::ResponseType;
use pb::set_forwarding_pipeline_config_request::Action;

/// What the caller must do after a successful Set.
#[derive(Debug, PartialEq, Eq)]
pub enum Effect {
    KeepState,
    /// Clear every table entry, register, counter and digest config.
    ClearForwardingState,
}

pub struct Pipeline {
    ours: cfg::P4Info,
    running: Option<pb::ForwardingPipelineConfig>,
    saved: Option<pb::ForwardingPipelineConfig>,
}

impl Pipeline {
    pub fn new(ours: cfg::P4Info) -> Self {
        Pipeline { ours, running: None, saved: None }
    }

    pub fn p4info(&self) -> &cfg::P4Info {
        &self.ours
    }

    fn verify(&self, config: Option<pb::ForwardingPipelineConfig>) -> P4Result<pb::ForwardingPipelineConfig> {
        let config = config.ok_or_else(|| P4Error::invalid("config is required for this action"))?;
        let p4info = config.p4info.as_ref().ok_or_else(|| P4Error::invalid("config.p4info is required"))?;
        compare(&self.ours, p4info)
            .map_err(|m| P4Error::invalid(format!("P4Info does not describe this target's pipeline: {m}")))?;
        Ok(config)
    }

    pub fn set(&mut self, action: i32, config: Option<pb::ForwardingPipelineConfig>) -> P4Result<Effect> {
        match Action::try_from(action) {
            Ok(Action::Verify) => {
                self.verify(config)?;
                Ok(Effect::KeepState)
            }
            Ok(Action::VerifyAndSave) => {
                self.saved = Some(self.verify(config)?);
                Ok(Effect::KeepState)
            }
            Ok(Action::VerifyAndCommit) => {
                self.running = Some(self.verify(config)?);
                self.saved = None;
                Ok(Effect::ClearForwardingState)
            }
            Ok(Action::Commit) => {
                if config.is_some() {
                    return Err(P4Error::invalid("COMMIT takes no config (it commits the saved one)"));
                }
                let saved = self
                    .saved
                    .take()
                    .ok_or_else(|| P4Error::not_found("no saved config to commit; send VERIFY_AND_SAVE first"))?;
                self.running = Some(saved);
                Ok(Effect::KeepState)
            }
            Ok(Action::ReconcileAndCommit) => {
                self.running = Some(self.verify(config)?);
                self.saved = None;
                Ok(Effect::KeepState)
            }
            Ok(Action::Unspecified) => Err(P4Error::invalid("action is UNSPECIFIED")),
            Err(_) => Err(P4Error::invalid(format!("unknown action {action}"))),
        }
    }

    pub fn get(&self, response_type: i32) -> P4Result<pb::ForwardingPipelineConfig> {
        let current = self.running.clone().unwrap_or_else(|| pb::ForwardingPipelineConfig {
            p4info: Some(self.ours.clone()),
            p4_device_config: Vec::new(),
            cookie: None,
        });
        let rt = ResponseType::try_from(response_type)
            .map_err(|_| P4Error::invalid(format!("unknown response_type {response_type}")))?;
        Ok(match rt {
            ResponseType::All => current,
            ResponseType::CookieOnly => pb::ForwardingPipelineConfig { cookie: current.cookie, ..Default::default() },
            ResponseType::P4infoAndCookie => {
                pb::ForwardingPipelineConfig { p4info: current.p4info, cookie: current.cookie, ..Default::default() }
            }
            ResponseType::DeviceConfigAndCookie => pb::ForwardingPipelineConfig {
                p4_device_config: current.p4_device_config,
                cookie: current.cookie,
                ..Default::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p4rt::p4info::build;
    use crate::state::Capacities;
    use tonic::Code;

    fn config(device: &[u8], cookie: u64) -> pb::ForwardingPipelineConfig {
        pb::ForwardingPipelineConfig {
            p4info: Some(build(&Capacities::default())),
            p4_device_config: device.to_vec(),
            cookie: Some(pb::forwarding_pipeline_config::Cookie { cookie }),
        }
    }

    #[test]
    fn get_before_set_returns_our_p4info() {
        let p = Pipeline::new(build(&Capacities::default()));
        let c = p.get(ResponseType::All as i32).unwrap();
        assert_eq!(c.p4info.as_ref(), Some(p.p4info()));
        assert!(c.p4_device_config.is_empty());
        assert_eq!(c.cookie, None);
    }

    #[test]
    fn set_then_get_is_symmetric_and_response_types_select_fields() {
        let mut p = Pipeline::new(build(&Capacities::default()));
        assert_eq!(
            p.set(Action::VerifyAndCommit as i32, Some(config(b"{\"bmv2\":1}", 42))),
            Ok(Effect::ClearForwardingState)
        );
        assert_eq!(p.get(ResponseType::All as i32).unwrap(), config(b"{\"bmv2\":1}", 42));
        let c = p.get(ResponseType::CookieOnly as i32).unwrap();
        assert!(c.p4info.is_none() && c.p4_device_config.is_empty() && c.cookie.unwrap().cookie == 42);
        let c = p.get(ResponseType::P4infoAndCookie as i32).unwrap();
        assert!(c.p4info.is_some() && c.p4_device_config.is_empty());
        let c = p.get(ResponseType::DeviceConfigAndCookie as i32).unwrap();
        assert!(c.p4info.is_none() && c.p4_device_config == b"{\"bmv2\":1}");
    }

    #[test]
    fn verify_save_commit_flow() {
        let mut p = Pipeline::new(build(&Capacities::default()));
        assert_eq!(p.set(Action::Commit as i32, None).unwrap_err().code, Code::NotFound);
        assert_eq!(p.set(Action::Verify as i32, Some(config(b"a", 1))), Ok(Effect::KeepState));
        assert_eq!(p.get(ResponseType::CookieOnly as i32).unwrap().cookie, None);
        assert_eq!(p.set(Action::VerifyAndSave as i32, Some(config(b"b", 2))), Ok(Effect::KeepState));
        assert_eq!(p.get(ResponseType::CookieOnly as i32).unwrap().cookie, None, "saved is not running yet");
        assert_eq!(p.set(Action::Commit as i32, Some(config(b"b", 2))).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(p.set(Action::Commit as i32, None), Ok(Effect::KeepState));
        assert_eq!(p.get(ResponseType::CookieOnly as i32).unwrap().cookie.unwrap().cookie, 2);
        assert_eq!(p.set(Action::ReconcileAndCommit as i32, Some(config(b"c", 3))), Ok(Effect::KeepState));
        assert_eq!(p.get(ResponseType::CookieOnly as i32).unwrap().cookie.unwrap().cookie, 3);
    }

    #[test]
    fn bad_configs_are_invalid_argument_with_the_first_mismatch() {
        let mut p = Pipeline::new(build(&Capacities::default()));
        assert_eq!(p.set(Action::Unspecified as i32, Some(config(b"", 0))).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(p.set(Action::Verify as i32, None).unwrap_err().code, Code::InvalidArgument);
        let mut c = config(b"", 0);
        c.p4info = None;
        assert_eq!(p.set(Action::VerifyAndCommit as i32, Some(c)).unwrap_err().code, Code::InvalidArgument);
        let mut c = config(b"", 0);
        c.p4info.as_mut().unwrap().tables[0].match_fields[0].bitwidth += 1;
        let e = p.set(Action::VerifyAndCommit as i32, Some(c)).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("bitwidth"), "{}", e.message);
        // A failed Set changes nothing.
        assert_eq!(p.get(ResponseType::CookieOnly as i32).unwrap().cookie, None);
    }
}
