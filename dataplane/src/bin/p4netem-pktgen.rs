//! p4netem-pktgen: a UDP/IPv4 packet generator for the benchmarks, fast enough to load the switch
//! (a Python sender tops out near 120 kpps).
//!
//! Writes frames straight into an AF_PACKET TX ring (the switch's own `io::afpacket`), one
//! `sendto` per batch. Packet i goes to destination address `--dst-ip + ((--first + i) * --stride) % --dst-count`,
//! so one sender can exercise many UEs (`set_profile_ue_by_addr` derives the UE from that address).
//! Prints one JSON line: packets sent, seconds, packets per second.
//!
//!   ip netns exec NS p4netem-pktgen --iface eth0 --src-mac 02:..:01 --dst-mac 02:..:02 \
//!       --src-ip 10.77.0.1 --dst-ip 10.79.0.0 --dst-count 100000 --duration 5
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;
use p4netem_switch::io::{AfPacket, RingConfig};

#[derive(Parser, Debug)]
#[command(version, about = "UDP packet generator on an AF_PACKET TX ring (p4netem benchmarks)")]
struct Args {
    /// Interface to send on (offloads off, as for the switch).
    #[arg(long)]
    iface: String,
    #[arg(long, value_parser = parse_mac)]
    src_mac: [u8; 6],
    #[arg(long, value_parser = parse_mac)]
    dst_mac: [u8; 6],
    #[arg(long)]
    src_ip: Ipv4Addr,
    /// First destination address; packet i goes to this + i % dst-count.
    #[arg(long)]
    dst_ip: Ipv4Addr,
    #[arg(long, default_value_t = 1)]
    dst_count: u32,
    /// Index of the first packet: packet i goes to --dst-ip + ((first + i) * stride) % dst-count,
    /// so successive runs can continue where the last stopped.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Step between the destinations of consecutive packets (coprime with --dst-count, so every
    /// destination still comes once per dst-count packets). 1 walks them in order, which the
    /// receiver's caches and prefetchers see as a stream; a large odd prime scatters them as a
    /// million independent UEs would arrive.
    #[arg(long, default_value_t = 1)]
    stride: u32,
    #[arg(long, default_value_t = 9)]
    src_port: u16,
    #[arg(long, default_value_t = 9)]
    dst_port: u16,
    /// Ethernet frame bytes (without FCS), at least 60.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Stop after this many seconds (0: only --count).
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
    /// Stop after this many packets (0: only --duration).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// Packets per second (0: as fast as the ring takes them).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    #[arg(long, default_value_t = 4096)]
    tx_frames: usize,
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address (six hex bytes separated by ':')"));
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| format!("{s:?} is not a MAC address"))?;
    }
    Ok(mac)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Internet checksum of an IPv4 header whose checksum field is 0.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The frame template: Ethernet, IPv4 (no options), UDP (checksum 0: none), zero payload.
fn template(a: &Args) -> Vec<u8> {
    let mut f = vec![0u8; a.size];
    f[0..6].copy_from_slice(&a.dst_mac);
    f[6..12].copy_from_slice(&a.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (a.size - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&a.src_ip.octets());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&a.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&a.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if a.size < 60 || a.size > p4netem_switch::io::afpacket::TX_MAX_FRAME {
        bail!("--size must be 60..={}", p4netem_switch::io::afpacket::TX_MAX_FRAME);
    }
    if a.dst_count == 0 {
        bail!("--dst-count must be at least 1");
    }
    if gcd(a.stride as u64, a.dst_count as u64) != 1 {
        bail!(
            "--stride {} must be coprime with --dst-count {} (every destination once per round)",
            a.stride,
            a.dst_count
        );
    }
    if a.duration <= 0.0 && a.count == 0 {
        bail!("give --duration and/or --count");
    }
    let mut port =
        AfPacket::open(&a.iface, &RingConfig { rx_frames: 64, tx_frames: a.tx_frames, ..RingConfig::default() })
            .with_context(|| format!("opening {}", a.iface))?;
    let frame = template(&a);
    let base = u32::from(a.dst_ip);
    let limit = if a.count == 0 { u64::MAX } else { a.count };
    let end = (a.duration > 0.0).then(|| Duration::from_secs_f64(a.duration));
    let interval = (a.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / a.rate));
    let start = Instant::now();
    let mut sent: u64 = 0;
    let mut full_waits: u64 = 0;
    'outer: while sent < limit {
        let now = start.elapsed();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        // Up to a batch per flush; with --rate, only what is due.
        let due = match interval {
            Some(iv) => ((now.as_nanos() / iv.as_nanos().max(1)) as u64 + 1).min(limit),
            None => limit,
        };
        let mut batch = 0;
        while sent < due && batch < 256 {
            let k = (a.first.wrapping_add(sent) % a.dst_count as u64) * a.stride as u64 % a.dst_count as u64;
            let dst = base.wrapping_add(k as u32);
            let pushed = port.tx_push(&frame, |d| {
                d[30..34].copy_from_slice(&dst.to_be_bytes());
                d[24..26].copy_from_slice(&[0, 0]);
                let c = ipv4_checksum(&d[14..34]);
                d[24..26].copy_from_slice(&c.to_be_bytes());
            });
            if !pushed {
                full_waits += 1;
                break;
            }
            sent += 1;
            batch += 1;
        }
        port.tx_flush().context("sendto")?;
        if batch == 0 {
            if interval.is_some() && sent < due {
                std::hint::spin_loop();
            } else if interval.is_some() {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::thread::yield_now(); // ring full: let the kernel drain it
            }
            if sent >= limit {
                break 'outer;
            }
        }
    }
    // Let the last frames leave before the ring is unmapped.
    for _ in 0..1000 {
        port.tx_flush().ok();
        if port.tx_ready() {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"sent\": {sent}, \"seconds\": {secs:.6}, \"pps\": {:.1}, \"ring_full_waits\": {full_waits}}}",
        sent as f64 / secs
    );
    Ok(())
}
