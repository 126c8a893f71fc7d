//! SwitchControl semantics: validation errors, batch publication, registers, counters, reset.
use std::sync::atomic::Ordering;

use super::*;
use crate::contract::*;

fn control() -> (SwitchControl, DataPlaneLink) {
    let cfg = ControlConfig {
        caps: Capacities { classifier_entries: 4, profiles: 8, ..Capacities::default() },
        ports: vec![1, 2],
        ..ControlConfig::default()
    };
    SwitchControl::new(cfg).unwrap()
}

fn port_map(port: u128, out: u128) -> TableEntry {
    TableEntry {
        table_id: TABLE_PORT_MAP,
        matches: vec![Some(FieldMatch::Exact(port))],
        priority: 0,
        action: ActionCall { action_id: ACTION_SET_EGRESS_PORT, params: vec![out] },
        controller_metadata: 0,
        metadata: Vec::new(),
    }
}

fn classifier(prio: i32, port: u128, profile: u128) -> TableEntry {
    let mut matches = vec![None; ck::COUNT];
    matches[ck::INGRESS_PORT] = Some(FieldMatch::Ternary { value: port, mask: 0x1ff });
    TableEntry {
        table_id: TABLE_CLASSIFIER,
        matches,
        priority: prio,
        action: ActionCall { action_id: ACTION_SET_PROFILE, params: vec![profile, 0, 0] },
        controller_metadata: 0,
        metadata: Vec::new(),
    }
}

fn profile(pid: u128, dir: u128, delay: u128) -> TableEntry {
    let mut params = vec![0u128; imp::COUNT];
    params[imp::DELAY_NS] = delay;
    TableEntry {
        table_id: TABLE_PROFILE,
        matches: vec![Some(FieldMatch::Exact(pid)), Some(FieldMatch::Exact(dir))],
        priority: 0,
        action: ActionCall { action_id: ACTION_SET_IMPAIRMENT, params },
        controller_metadata: 0,
        metadata: Vec::new(),
    }
}

fn kind(r: &Result<(), StateError>) -> &'static str {
    match r {
        Ok(()) => "ok",
        Err(StateError::InvalidArgument(_)) => "invalid",
        Err(StateError::NotFound(_)) => "notfound",
        Err(StateError::AlreadyExists(_)) => "exists",
        Err(StateError::OutOfRange(_)) => "range",
        Err(StateError::ResourceExhausted(_)) => "full",
        Err(StateError::FailedPrecondition(_)) => "precondition",
    }
}

#[test]
fn table_write_errors() {
    let (c, _l) = control();
    let mut unknown = port_map(1, 2);
    unknown.table_id = 0x0200_0099;
    let mut wrong_action = port_map(1, 2);
    wrong_action.action.action_id = ACTION_SET_PROFILE;
    let mut wrong_params = port_map(1, 2);
    wrong_params.action.params.push(1);
    let mut too_wide = port_map(1, 2);
    too_wide.action.params[0] = 512;
    let mut exact_with_prio = port_map(3, 2);
    exact_with_prio.priority = 5;
    let mut no_prio = classifier(1, 1, 1);
    no_prio.priority = 0;
    let mut bad_mask = classifier(1, 1, 1);
    bad_mask.matches[ck::INGRESS_PORT] = Some(FieldMatch::Ternary { value: 3, mask: 1 });
    let mut bad_kind = classifier(1, 1, 1);
    bad_kind.matches[ck::L4_SRC_PORT] = Some(FieldMatch::Exact(80));
    let mut noaction_entry = profile(1, 0, 0);
    noaction_entry.action = ActionCall { action_id: ACTION_NO_ACTION, params: vec![] };
    let results = c.write_tables(vec![
        (UpdateKind::Insert, port_map(1, 2)),
        (UpdateKind::Insert, port_map(1, 2)),
        (UpdateKind::Insert, unknown),
        (UpdateKind::Insert, wrong_action),
        (UpdateKind::Insert, wrong_params),
        (UpdateKind::Insert, too_wide),
        (UpdateKind::Insert, exact_with_prio),
        (UpdateKind::Insert, no_prio),
        (UpdateKind::Insert, bad_mask),
        (UpdateKind::Insert, bad_kind),
        (UpdateKind::Modify, port_map(9, 1)),
        (UpdateKind::Delete, port_map(9, 1)),
        (UpdateKind::Insert, classifier(1, 1, 8)), // profile_id >= --profiles
        (UpdateKind::Insert, profile(8, 0, 0)),    // key profile_id >= --profiles
        (UpdateKind::Insert, noaction_entry),      // NoAction is @defaultonly in profile
    ]);
    let kinds: Vec<&str> = results.iter().map(kind).collect();
    assert_eq!(
        kinds,
        vec![
            "ok", "exists", "notfound", "invalid", "invalid", "invalid", "invalid", "invalid", "invalid", "invalid",
            "notfound", "notfound", "range", "range", "invalid"
        ]
    );
    // Only the successful insert is there.
    assert_eq!(c.read_table(TABLE_PORT_MAP).unwrap(), vec![port_map(1, 2)]);
}

#[test]
fn capacity_is_the_runtime_size() {
    let (c, _l) = control();
    let batch: Vec<_> = (0..5).map(|i| (UpdateKind::Insert, classifier(10 + i, i as u128, 1))).collect();
    let kinds: Vec<&str> = c.write_tables(batch).iter().map(kind).collect();
    assert_eq!(kinds, vec!["ok", "ok", "ok", "ok", "full"]);
    assert_eq!(c.read_table(TABLE_CLASSIFIER).unwrap().len(), 4);
    assert_eq!(kind(&c.write_tables(vec![(UpdateKind::Delete, classifier(10, 0, 0))])[0]), "ok");
    assert_eq!(kind(&c.write_tables(vec![(UpdateKind::Insert, classifier(99, 7, 1))])[0]), "ok");
}

#[test]
fn batch_publishes_one_snapshot_with_all_changes() {
    let (c, l) = control();
    let before = l.snapshot.load_full();
    c.write_tables(vec![
        (UpdateKind::Insert, port_map(1, 2)),
        (UpdateKind::Insert, classifier(5, 1, 3)),
        (UpdateKind::Insert, profile(3, 0, 1_000_000)),
    ]);
    let after = l.snapshot.load_full();
    assert!(!std::sync::Arc::ptr_eq(&before, &after));
    assert_eq!(after.port_map.get(1), Some(crate::tables::Forward::Port(2)));
    let key = crate::tables::ClassKey { ingress_port: 1, ..Default::default() };
    assert_eq!(after.classifier.lookup(&key).unwrap().pd(), 6);
    assert_eq!(after.impairment(6).unwrap().delay_ns, 1_000_000);
    // Untouched tables are shared, not rebuilt.
    assert!(std::sync::Arc::ptr_eq(&before.l2_fwd, &after.l2_fwd));
    // Modify replaces the action; read returns the new one.
    c.write_tables(vec![(UpdateKind::Modify, profile(3, 0, 7))]);
    assert_eq!(l.snapshot.load().impairment(6).unwrap().delay_ns, 7);
}

#[test]
fn defaults_and_const_default() {
    let (c, l) = control();
    assert_eq!(c.default_action(TABLE_PORT_MAP).unwrap().action_id, ACTION_DROP_PACKET);
    c.set_default_action(TABLE_L2_LEARN, Some(ActionCall { action_id: ACTION_LEARN, params: vec![] })).unwrap();
    assert!(l.snapshot.load().learn_on_miss);
    let e = c.set_default_action(TABLE_L2_FWD, Some(ActionCall { action_id: ACTION_SEND_TO_CPU, params: vec![] }));
    assert_eq!(kind(&e), "invalid");
    let bad = c.set_default_action(
        TABLE_CLASSIFIER,
        Some(ActionCall { action_id: ACTION_SET_PROFILE, params: vec![9, 0, 0] }),
    );
    assert_eq!(kind(&bad), "range");
    c.set_default_action(TABLE_L2_LEARN, None).unwrap();
    assert!(!l.snapshot.load().learn_on_miss);
    // The controller's cookies stay with the default entry until it is reset or the state cleared.
    let cookies = DefaultCookies { controller_metadata: 5, metadata: b"m".to_vec() };
    let learn = ActionCall { action_id: ACTION_LEARN, params: vec![] };
    c.set_default_entry(TABLE_L2_LEARN, Some(learn.clone()), cookies.clone()).unwrap();
    assert_eq!(c.default_cookies(TABLE_L2_LEARN).unwrap(), cookies);
    c.set_default_entry(TABLE_L2_LEARN, None, cookies.clone()).unwrap();
    assert_eq!(c.default_cookies(TABLE_L2_LEARN).unwrap(), DefaultCookies::default());
    c.set_default_entry(TABLE_L2_LEARN, Some(learn), cookies).unwrap();
    c.reset_all();
    assert_eq!(c.default_cookies(TABLE_L2_LEARN).unwrap(), DefaultCookies::default());
}

#[test]
fn registers_counters_and_reset() {
    let (c, l) = control();
    assert_eq!(c.register_size(REG_NEXT_FREE_NS).unwrap(), 16);
    assert_eq!(kind(&c.read_register(REG_NEXT_FREE_NS, 16).map(|_| ())), "range");
    assert_eq!(kind(&c.write_register(REG_GE_STATE, 0, 256)), "invalid");
    assert_eq!(kind(&c.read_register(0x1600_0099, 0).map(|_| ())), "notfound");
    // Writing the seed bumps the generation the data plane watches.
    let g = l.registers.rng_seed_generation.load(Ordering::Acquire);
    c.write_register(REG_RNG_SEED, 0, 1234).unwrap();
    assert_eq!(l.registers.rng_seed_generation.load(Ordering::Acquire), g + 1);
    assert_eq!(c.read_register(REG_RNG_SEED, 0).unwrap(), 1234);
    // dist_table holds the built-in normal table: median sample 0, sorted.
    assert!(c.read_register(REG_DIST_TABLE, 2048).unwrap() < 200);
    assert_eq!(c.counter_size(COUNTER_DROPS).unwrap(), 16 * DROP_REASONS);
    l.counters.profile_in.add(3, 100);
    assert_eq!(c.read_counter(COUNTER_PROFILE_IN, 3).unwrap(), (100, 1));
    assert_eq!(kind(&c.read_counter(COUNTER_PROFILE_IN, 16).map(|_| ())), "range");
    c.write_counter(COUNTER_PROFILE_IN, 3, 5, 6).unwrap();
    assert_eq!(c.read_counter(COUNTER_PROFILE_IN, 3).unwrap(), (5, 6));
    c.write_tables(vec![(UpdateKind::Insert, port_map(1, 2))]);
    c.write_register(REG_NEXT_FREE_NS, 1, 99).unwrap();
    c.reset_all();
    assert!(c.read_table(0).unwrap().is_empty());
    assert_eq!(c.read_counter(COUNTER_PROFILE_IN, 3).unwrap(), (0, 0));
    assert_eq!(c.read_register(REG_NEXT_FREE_NS, 1).unwrap(), 0);
    assert!(l.snapshot.load().port_map.get(1).is_none());
}

#[test]
fn packet_out_checks_and_queue() {
    let (c, l) = control();
    assert_eq!(kind(&c.packet_out(7, vec![0; 60])), "invalid");
    assert_eq!(kind(&c.packet_out(1, vec![0; 5])), "invalid");
    c.packet_out(2, vec![1; 60]).unwrap();
    assert_eq!(l.packet_out_rx.try_recv().unwrap(), (2, vec![1; 60]));
}

#[tokio::test]
async fn packet_in_and_digest_queues_deliver() {
    let (c, l) = control();
    l.packet_in_tx.try_send(PacketIn { ingress_port: 2, payload: vec![9; 20] }).unwrap();
    l.digest_tx.try_send(DigestEvent { digest_id: DIGEST_MAC_LEARN, fields: vec![0xaabb, 1] }).unwrap();
    assert_eq!(c.next_packet_in().await.ingress_port, 2);
    assert_eq!(c.next_digest().await.fields, vec![0xaabb, 1]);
}

fn radio_entry(pid: u128, model: u128) -> TableEntry {
    let mut params = vec![0u128; rp::COUNT];
    params[rp::MODEL] = model;
    params[rp::IDLE_TO_CONNECTED_NS] = 260_000_000;
    TableEntry {
        table_id: TABLE_RADIO_PROFILE,
        matches: vec![Some(FieldMatch::Exact(pid))],
        priority: 0,
        action: ActionCall { action_id: ACTION_SET_RADIO, params },
        controller_metadata: 0,
        metadata: Vec::new(),
    }
}

fn by_addr(base: u128, mask: u128) -> TableEntry {
    let mut e = classifier(5, 1, 1);
    e.action = ActionCall { action_id: ACTION_SET_PROFILE_UE_BY_ADDR, params: vec![1, 0, base, mask, 1] };
    e
}

#[test]
fn radio_table_ue_range_and_radio_registers() {
    let cfg = ControlConfig {
        caps: Capacities { profiles: 8, ue_ids: 1000, ..Capacities::default() },
        ..ControlConfig::default()
    };
    let (c, l) = SwitchControl::new(cfg).unwrap();
    // The radio entry compiles into the snapshot; model 0 means no radio.
    let r = c.write_tables(vec![
        (UpdateKind::Insert, radio_entry(3, 2)),
        (UpdateKind::Insert, radio_entry(4, 0)),
        (UpdateKind::Insert, radio_entry(8, 2)),
        (UpdateKind::Insert, radio_entry(5, 4)),
    ]);
    assert_eq!(r.iter().map(kind).collect::<Vec<_>>(), vec!["ok", "ok", "range", "invalid"]);
    let snap = l.snapshot.load();
    assert_eq!(snap.radio(3).map(|p| p.idle_to_connected_ns), Some(260_000_000));
    assert!(snap.radio(4).is_none() && snap.radio(2).is_none());
    // Address-derived UE ids must stay inside --ue-ids.
    let r = c.write_tables(vec![(UpdateKind::Insert, by_addr(900, 99)), (UpdateKind::Insert, by_addr(900, 100))]);
    assert_eq!(r.iter().map(kind).collect::<Vec<_>>(), vec!["ok", "range"]);
    let key = crate::tables::ClassKey { ingress_port: 1, ipv4_dst: 0x0a00_0023, ..Default::default() };
    let sel = l.snapshot.load().classifier.lookup(&key);
    assert_eq!(sel.map(|s| s.ue(0, 0x0a00_0023)), Some(935)); // 900 + (0x23 & 99)
                                                              // Per-UE registers: sized by --ue-ids, read/write at the edges, cleared by a reset.
    assert_eq!(c.register_size(REG_RADIO_STATE).unwrap(), 1000);
    assert_eq!(c.register_size(REG_RADIO_STATE_TIME_NS).unwrap(), 16_000);
    assert_eq!(c.register_size(REG_RADIO_FACH_FREE_NS).unwrap(), 2000);
    assert_eq!(c.counter_size(COUNTER_RADIO_PROMOTIONS).unwrap(), 4000);
    c.write_register(REG_RADIO_STATE, 999, 3).unwrap();
    c.write_register(REG_RADIO_STATE_TIME_NS, 15_999, u64::MAX as u128).unwrap();
    assert_eq!(kind(&c.write_register(REG_RADIO_STATE, 999, 256)), "invalid");
    assert_eq!(kind(&c.write_register(REG_RADIO_STATE, 1000, 1)), "range");
    assert_eq!(c.read_register(REG_RADIO_STATE, 999).unwrap(), 3);
    assert_eq!(c.read_register(REG_RADIO_STATE_TIME_NS, 15_999).unwrap(), u64::MAX as u128);
    c.write_counter(COUNTER_RADIO_PROMOTIONS, 3999, 0, 7).unwrap();
    assert_eq!(c.read_counter(COUNTER_RADIO_PROMOTIONS, 3999).unwrap(), (0, 7));
    c.reset_all();
    assert_eq!(c.read_register(REG_RADIO_STATE, 999).unwrap(), 0);
    assert_eq!(c.read_register(REG_RADIO_STATE_TIME_NS, 15_999).unwrap(), 0);
    assert_eq!(c.read_counter(COUNTER_RADIO_PROMOTIONS, 3999).unwrap(), (0, 0));
    assert!(l.snapshot.load().radio(3).is_none());
}

#[test]
fn a_million_ues_cost_no_start_time() {
    // Default capacities: 1M UEs, 16M state-time cells. Allocation is lazy, reset scans quickly.
    // Timed in this thread's CPU time, not wall time: a debug build at load 4.6 took 592 ms of
    // wall time to create the state, the scheduler's time and not the code's.
    let cpu = || {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts is a valid timespec for the calling thread's clock.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let t = cpu();
    let (c, _l) = SwitchControl::new(ControlConfig::default()).unwrap();
    let created = cpu() - t;
    c.write_register(REG_RADIO_LAST_ACTIVITY_NS, 1_048_575, 1).unwrap();
    let t = cpu();
    c.reset_all();
    let reset = cpu() - t;
    assert_eq!(c.read_register(REG_RADIO_LAST_ACTIVITY_NS, 1_048_575).unwrap(), 0);
    assert!(created.as_millis() < 500, "creating the state took {created:?} of CPU");
    assert!(reset.as_millis() < 3000, "reset took {reset:?} of CPU");
}

/// The store keeps two classifier copies and updates the unpublished one in place
/// (entries.rs WHY_TWO_COPIES): a snapshot a reader still holds never changes, and once nobody
/// holds it its copy is reused (caught up with the batches it missed) instead of rebuilt.
#[test]
fn classifier_copies_are_reused_only_when_unread_and_never_change_while_held() {
    let cfg = ControlConfig {
        caps: Capacities { classifier_entries: 64, profiles: 32, ..Capacities::default() },
        ..ControlConfig::default()
    };
    let (c, l) = SwitchControl::new(cfg).unwrap();
    let key = |port: u16| crate::tables::ClassKey { ingress_port: port, ..Default::default() };
    let pd = |s: &crate::tables::Snapshot, port: u16| s.classifier.lookup(&key(port)).map(|r| r.pd());
    c.write_tables(vec![(UpdateKind::Insert, classifier(5, 1, 3))]);
    let a = l.snapshot.load_full(); // held, like a data-plane turn that has not ended
    c.write_tables(vec![(UpdateKind::Insert, classifier(5, 2, 4)), (UpdateKind::Modify, classifier(5, 1, 9))]);
    let b = l.snapshot.load_full();
    // A third batch while `a` is held: `a`'s copy cannot be reused, so it is left alone.
    c.write_tables(vec![(UpdateKind::Delete, classifier(5, 2, 0)), (UpdateKind::Insert, classifier(6, 3, 5))]);
    assert_eq!((pd(&a, 1), pd(&a, 2), pd(&a, 3)), (Some(6), None, None));
    assert_eq!((pd(&b, 1), pd(&b, 2), pd(&b, 3)), (Some(18), Some(8), None));
    let third = l.snapshot.load_full();
    assert_eq!((pd(&third, 1), pd(&third, 2), pd(&third, 3)), (Some(18), None, Some(10)));
    let (c2, c3) = (std::sync::Arc::as_ptr(&b.classifier), std::sync::Arc::as_ptr(&third.classifier));
    drop((a, b, third));
    // Nobody holds the second batch's copy now: the fourth batch reuses it (same allocation)
    // after replaying the third batch on it, and the fifth reuses the third's.
    c.write_tables(vec![(UpdateKind::Insert, classifier(7, 4, 6))]);
    let fourth = l.snapshot.load_full();
    assert!(std::ptr::eq(std::sync::Arc::as_ptr(&fourth.classifier), c2));
    c.write_tables(vec![(UpdateKind::Delete, classifier(6, 3, 0))]);
    let fifth = l.snapshot.load_full();
    assert!(std::ptr::eq(std::sync::Arc::as_ptr(&fifth.classifier), c3));
    assert_eq!(fourth.classifier.len(), 3);
    assert_eq!((pd(&fourth, 1), pd(&fourth, 3), pd(&fourth, 4)), (Some(18), Some(10), Some(12)));
    assert_eq!((pd(&fifth, 1), pd(&fifth, 2), pd(&fifth, 3), pd(&fifth, 4)), (Some(18), None, None, Some(12)));
    assert_eq!(fifth.classifier.len(), 2);
}

/// Figures, not a check (`cargo test --release -- --ignored write_path_figures --nocapture`): the
/// store's side of P4Runtime writes. 64k ternary classifier inserts in batches of 500, then 2000
/// one-entry MODIFYs into the full table, timed around `write_tables` (validation, entry lists,
/// classifier update, snapshot publication). Baseline in the same run: what each batch cost before
/// the classifier was updated in place, a `Classifier::build` of the whole table.
#[test]
#[ignore]
fn write_path_figures() {
    use std::time::Instant;
    let cfg = ControlConfig { caps: Capacities::default(), ..ControlConfig::default() };
    let (c, l) = SwitchControl::new(cfg).unwrap();
    let entry = |i: u32, profile: u128| {
        let mut matches = vec![None; ck::COUNT];
        matches[ck::IPV4_SRC] = Some(FieldMatch::Ternary { value: 0x0a80_0000 + i as u128, mask: 0xffff_ffff });
        TableEntry {
            table_id: TABLE_CLASSIFIER,
            matches,
            priority: 1000 + i as i32,
            action: ActionCall { action_id: ACTION_SET_PROFILE, params: vec![profile, 0, i as u128] },
            controller_metadata: 0,
            metadata: Vec::new(),
        }
    };
    // A reader like the data plane: takes the snapshot once per "turn", never while idle.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, snap) = (stop.clone(), l.snapshot.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let s = snap.load_full();
                n += s.classifier.len() as u64;
                drop(s);
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
            n
        })
    };
    // Thread CPU time next to wall time: on a shared machine the wall figures are the scheduler's.
    let cpu = || {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts is a valid timespec for the calling thread's clock.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    };
    let n = 65_536u32;
    let (mut t_new, mut t_old, mut c_new, mut c_old) = (0f64, 0f64, 0f64, 0f64);
    let mut rules = Vec::new();
    for start in (0..n).step_by(500) {
        let batch: Vec<_> = (start..(start + 500).min(n)).map(|i| (UpdateKind::Insert, entry(i, 1))).collect();
        let (t, c0) = (Instant::now(), cpu());
        assert!(c.write_tables(batch).iter().all(|r| r.is_ok()));
        t_new += t.elapsed().as_secs_f64();
        c_new += cpu() - c0;
        for i in start..(start + 500).min(n) {
            rules.push(super::entries::test_rule(i as u64, &entry(i, 1)));
        }
        let (t, c0) = (Instant::now(), cpu());
        std::hint::black_box(crate::tables::Classifier::build(&rules));
        t_old += t.elapsed().as_secs_f64();
        c_old += cpu() - c0;
    }
    let (mut rtt, mut rtt_cpu) = (Vec::new(), Vec::new());
    for k in 0..2000u32 {
        let (t, c0) = (Instant::now(), cpu());
        assert!(c.write_tables(vec![(UpdateKind::Modify, entry(k * 31 % n, 1 + (k % 2) as u128))])[0].is_ok());
        rtt.push(t.elapsed().as_secs_f64() * 1e3);
        rtt_cpu.push((cpu() - c0) * 1e3);
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    rtt.sort_by(|a, b| a.partial_cmp(b).unwrap());
    rtt_cpu.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "write_path_figures: {n} inserts in batches of 500: {:.0}/s in place (store side; {:.0}/s of thread CPU), \
         a whole-table rebuild per batch alone (the old compile) {:.0}/s ({:.0}/s of CPU); one-entry MODIFY in the \
         full table p50 {:.3} ms p99 {:.3} ms max {:.3} ms (CPU p99 {:.3} ms); loadavg {}",
        n as f64 / t_new,
        n as f64 / c_new,
        n as f64 / t_old,
        n as f64 / c_old,
        rtt[rtt.len() / 2],
        rtt[rtt.len() * 99 / 100],
        rtt[rtt.len() - 1],
        rtt_cpu[rtt_cpu.len() * 99 / 100],
        load.trim()
    );
}

#[test]
fn capacities_refuse_ue_ids_whose_array_sizes_would_wrap() {
    let at = |ue_ids| Capacities { ue_ids, ..Capacities::default() };
    assert!(at(Capacities::MAX_UE_IDS).check().is_ok());
    let max = at(Capacities::MAX_UE_IDS);
    assert!(max.register_size(crate::contract::REG_RADIO_STATE_TIME_NS).unwrap() >= Capacities::MAX_UE_IDS);
    let e = at(Capacities::MAX_UE_IDS + 1).check().unwrap_err();
    assert!(e.starts_with("--ue-ids must be at most 268435455"), "{e}");
    assert!(at(0).check().is_ok());
    assert!(Capacities { profiles: 0, ..Capacities::default() }.check().is_err());
    assert!(Capacities { classifier_entries: 0, ..Capacities::default() }.check().is_err());
    assert!(Capacities::default().check().is_ok());
}
