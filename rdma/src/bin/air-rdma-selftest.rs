//! Multi-rank checks of air-rdma, started by `mpirun -np N` from
//! `rdma/tests/mpirun.rs`. Each mode prints `OK <mode> rank <r>` on success
//! and exits non-zero with a message on failure.
//!
//! - `ops`: put, get, accumulate (sum, replace), fetch_and_op on a window,
//!   with values every rank can predict.
//! - `ring FRAMES CAP`: every rank sends FRAMES frames of pseudo-random
//!   sizes (0..=CAP/2 bytes) to the next rank through a remote ring of CAP
//!   bytes and checks every byte, kind and order of what it receives from
//!   the previous rank. The receiver only ever polls its ring (it makes no
//!   other MPI call), so this also proves the ring drives MPI progress.
//! - `full FRAMES CAP`: the receiver of every ring reads nothing for the
//!   first second: the sender must find the ring full (`try_send` says no)
//!   after at most CAP bytes of frames and stay blocked, never dropping;
//!   then the receiver reads all FRAMES numbered frames and checks that
//!   none is lost, repeated or out of order.
//! - `outbox FRAMES CAP SENDERS`: as `ring`, but SENDERS threads of each rank
//!   share the one ring to the next rank (an `RmaOutbox`), each sending
//!   FRAMES frames and then End; the receiver checks each sender's frames
//!   in that sender's order, by the sender index in the headers.

use air_rdma::{
    heartbeat_bytes, ring_region_bytes, Liveness, Mpi, Op, RmaConsumer, RmaOutbox, RmaProducer,
    Window, CREDIT_BYTES,
};
use air_shm::FrameKind;
use std::sync::atomic::AtomicBool;

fn fail(msg: String) -> ! {
    eprintln!("air-rdma-selftest: {msg}");
    std::process::exit(1)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("ops");
    let mpi = Mpi::init().unwrap_or_else(|e| fail(e.to_string()));
    let r = match mode {
        "ops" => ops(&mpi),
        "ring" => {
            let frames: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
            let cap: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4096);
            ring(&mpi, frames, cap)
        }
        "outbox" => {
            let frames: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
            let cap: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4096);
            let senders: u16 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(3);
            outbox(&mpi, frames, cap, senders)
        }
        "full" => {
            let frames: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2_000);
            let cap: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4096);
            full(&mpi, frames, cap)
        }
        "putbw" => putbw(&mpi),
        "info" => {
            println!(
                "rank {} of {} node {} of {} local {} of {} host {} library {}",
                mpi.rank(),
                mpi.size(),
                mpi.node_of(mpi.rank()),
                mpi.nodes(),
                mpi.local_rank(),
                mpi.local_size(),
                mpi.host_of(mpi.rank()),
                mpi.library()
            );
            Ok(())
        }
        m => Err(format!("unknown mode {m}")),
    };
    if let Err(e) = r {
        fail(format!("rank {}: {e}", mpi.rank()));
    }
    println!("OK {mode} rank {}", mpi.rank());
}

fn ops(mpi: &Mpi) -> Result<(), String> {
    let n = mpi.size();
    let me = mpi.rank();
    let win = Window::allocate(mpi, 8192).map_err(|e| e.to_string())?;
    if !win.is_unified() {
        return Err("window is not in the unified memory model".into());
    }
    {
        let ep = win.lock_all().map_err(|e| e.to_string())?;
        // Every rank puts its rank+1 into slot `me` of every rank (bytes 8*me).
        let mine = ((me as u64) + 1).to_le_bytes();
        for t in 0..n {
            ep.put(&mine, t, 8 * me)
                .and_then(|p| p.flush())
                .map_err(|e| e.to_string())?;
        }
        // Everyone adds me+1 into word 512 of rank 0.
        let add = [(me as u64) + 1];
        ep.accumulate(&add, Op::Sum, 0, 512 * 8)
            .and_then(|p| p.flush())
            .map_err(|e| e.to_string())?;
        // fetch_and_op: everyone adds 10 to word 513 of rank 0.
        let ten = 10u64;
        let mut old = 0u64;
        ep.fetch_and_op(&ten, &mut old, Op::Sum, 0, 513 * 8)
            .and_then(|p| p.flush())
            .map_err(|e| e.to_string())?;
        if old % 10 != 0 || old >= 10 * n as u64 {
            return Err(format!("fetch_and_op returned {old}"));
        }
        mpi.barrier();
        ep.sync().map_err(|e| e.to_string())?;
        // Read every rank's slot table with get and check it.
        for t in 0..n {
            let mut buf = vec![0u8; 8 * n];
            ep.get(&mut buf, t, 0)
                .and_then(|p| p.flush())
                .map_err(|e| e.to_string())?;
            for s in 0..n {
                let v = u64::from_le_bytes(buf[8 * s..8 * s + 8].try_into().unwrap());
                if v != s as u64 + 1 {
                    return Err(format!("rank {t} slot {s} holds {v}, expected {}", s + 1));
                }
            }
        }
        let mut sums = [0u8; 16];
        ep.get(&mut sums, 0, 512 * 8)
            .and_then(|p| p.flush())
            .map_err(|e| e.to_string())?;
        let sum = u64::from_le_bytes(sums[..8].try_into().unwrap());
        let fop = u64::from_le_bytes(sums[8..].try_into().unwrap());
        let want = (n * (n + 1) / 2) as u64;
        if sum != want || fop != 10 * n as u64 {
            return Err(format!(
                "accumulate gave {sum} (want {want}), fetch_and_op total {fop} (want {})",
                10 * n
            ));
        }
        // Replace, then an atomic read with NO_OP.
        let seven = 7u64;
        mpi.barrier();
        if me == 0 {
            ep.accumulate(&[seven], Op::Replace, n - 1, 600 * 8)
                .and_then(|p| p.flush())
                .map_err(|e| e.to_string())?;
        }
        mpi.barrier();
        let mut got = 0u64;
        ep.fetch_and_op(&0, &mut got, Op::NoOp, n - 1, 600 * 8)
            .and_then(|p| p.flush())
            .map_err(|e| e.to_string())?;
        if got != 7 {
            return Err(format!("replace then no-op read gave {got}"));
        }
        mpi.barrier();
    }
    Ok(())
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn ring(mpi: &Mpi, frames: u64, cap: usize) -> Result<(), String> {
    let n = mpi.size();
    let me = mpi.rank();
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    // Part: heartbeats | one incoming ring (from prev) | one credit slot (to next).
    let hb = heartbeat_bytes(n).next_multiple_of(128);
    let ring_at = hb;
    let credit_at = ring_at + ring_region_bytes(cap);
    let win = Window::allocate(mpi, credit_at + CREDIT_BYTES).map_err(|e| e.to_string())?;
    let ep = win.lock_all().map_err(|e| e.to_string())?;
    let live = Liveness::new(mpi);
    let mut tx =
        RmaProducer::new(&ep, &live, next, ring_at, cap, credit_at).map_err(|e| e.to_string())?;
    let mut rx =
        RmaConsumer::new(&ep, &live, prev, ring_at, cap, credit_at).map_err(|e| e.to_string())?;
    mpi.barrier();
    // Frames of up to half the ring, or the largest a ring segment holds.
    let max = (cap / 2).min(tx.max_payload());
    let stop = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        let recv = s.spawn(move || -> Result<u64, String> {
            let mut rng = prev as u64 * 7919;
            let mut got = 0u64;
            let mut bytes = 0u64;
            let mut idle = 0u64;
            while got < frames + 1 {
                let mut err = None;
                let mut ended = false;
                let r = rx.try_recv(&mut |kind, payload| {
                    if got == frames {
                        ended = kind == FrameKind::End;
                        if !ended {
                            err = Some(format!("frame {got}: kind {kind:?}, expected End"));
                        }
                        return;
                    }
                    let len = (splitmix(&mut rng) as usize) % (max + 1);
                    let fill = (splitmix(&mut rng) & 0xff) as u8;
                    if kind != FrameKind::Data || payload.len() != len {
                        err = Some(format!(
                            "frame {got}: {kind:?} of {} bytes, expected Data of {len}",
                            payload.len()
                        ));
                    } else if let Some(i) = payload
                        .iter()
                        .enumerate()
                        .position(|(i, &b)| b != fill.wrapping_add(i as u8))
                    {
                        err = Some(format!("frame {got}: byte {i} differs"));
                    }
                    bytes += payload.len() as u64;
                });
                match r {
                    Ok(true) => {
                        idle = 0;
                        if let Some(e) = err {
                            return Err(e);
                        }
                        got += 1;
                        rx.release().map_err(|e| e.to_string())?;
                    }
                    Ok(false) => {
                        idle += 1;
                        if idle == 50_000_000 {
                            eprintln!("rank {me}: stuck receiving after {got} frames: {rx:?}");
                        }
                        // Yield: the tests run more ranks than cores, and
                        // MPICH completes a peer's flush only while this
                        // rank gets CPU time to call into MPI.
                        std::thread::yield_now()
                    }
                    Err(e) => return Err(format!("receive after {got} frames: {e}")),
                }
            }
            Ok(bytes)
        });
        let mut rng = me as u64 * 7919;
        let send = (|| -> Result<(), String> {
            for i in 0..=frames {
                let (kind, len, fill) = if i == frames {
                    (FrameKind::End, 0, 0u8)
                } else {
                    let len = (splitmix(&mut rng) as usize) % (max + 1);
                    (FrameKind::Data, len, (splitmix(&mut rng) & 0xff) as u8)
                };
                let mut stuck = 0u64;
                loop {
                    let sent = tx
                        .try_send(kind, len, &mut |buf| {
                            for (j, b) in buf[..len].iter_mut().enumerate() {
                                *b = fill.wrapping_add(j as u8);
                            }
                            Some(len)
                        })
                        .map_err(|e| e.to_string())?;
                    if sent {
                        break;
                    }
                    std::thread::yield_now();
                    stuck += 1;
                    if stuck == 50_000_000 {
                        eprintln!("rank {me}: stuck sending frame {i}: {tx:?}");
                    }
                    tx.flush().map_err(|e| e.to_string())?;
                }
                if i % 8 == 7 {
                    tx.flush().map_err(|e| e.to_string())?;
                }
            }
            tx.flush().map_err(|e| e.to_string())
        })();
        let got = recv.join().map_err(|_| "receiver panicked".to_string())?;
        stop.store(true, std::sync::atomic::Ordering::Release);
        send?;
        got
    })?;
    drop(tx);
    mpi.barrier();
    drop(ep);
    drop(win);
    println!("rank {me}: received {frames} frames, {result} bytes from rank {prev}");
    Ok(())
}

/// The frame a sender sends as its `i`-th: (payload length, first byte),
/// a function of (rank, sender, i) only, so the receiver can predict it.
fn full(mpi: &Mpi, frames: u64, cap: usize) -> Result<(), String> {
    let n = mpi.size();
    let me = mpi.rank();
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    let hb = heartbeat_bytes(n).next_multiple_of(128);
    let ring_at = hb;
    let credit_at = ring_at + ring_region_bytes(cap);
    let win = Window::allocate(mpi, credit_at + CREDIT_BYTES).map_err(|e| e.to_string())?;
    let ep = win.lock_all().map_err(|e| e.to_string())?;
    let live = Liveness::new(mpi);
    let mut tx =
        RmaProducer::new(&ep, &live, next, ring_at, cap, credit_at).map_err(|e| e.to_string())?;
    let mut rx =
        RmaConsumer::new(&ep, &live, prev, ring_at, cap, credit_at).map_err(|e| e.to_string())?;
    mpi.barrier();
    // Frames of 40 payload bytes: 56 bytes (64 with alignment) each.
    const LEN: usize = 40;
    let fit = (cap / 64) as u64;
    let start = std::time::Instant::now();
    let paused = std::time::Duration::from_secs(1);
    std::thread::scope(|s| -> Result<(), String> {
        let recv = s.spawn(move || -> Result<(), String> {
            // Read nothing while the sender fills the ring.
            while start.elapsed() < paused {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let mut got = 0u64;
            while got < frames {
                let mut err = None;
                let r = rx.try_recv(&mut |kind, payload| {
                    let want = got.to_le_bytes();
                    if kind != FrameKind::Data || payload.len() != LEN || payload[..8] != want {
                        err = Some(format!(
                            "frame {got}: {kind:?} of {} bytes starting {:?}",
                            payload.len(),
                            &payload[..payload.len().min(8)]
                        ));
                    }
                });
                match r {
                    Ok(true) => {
                        if let Some(e) = err {
                            return Err(e);
                        }
                        got += 1;
                        rx.release().map_err(|e| e.to_string())?;
                    }
                    Ok(false) => std::thread::yield_now(),
                    Err(e) => return Err(format!("receive after {got} frames: {e}")),
                }
            }
            Ok(())
        });
        let mut sent = 0u64;
        let mut refused_while_paused = 0u64;
        while sent < frames {
            let ok = tx
                .try_send(FrameKind::Data, LEN, &mut |b| {
                    b[..8].copy_from_slice(&sent.to_le_bytes());
                    Some(LEN)
                })
                .map_err(|e| e.to_string())?;
            let early = start.elapsed() < paused / 2;
            if ok {
                sent += 1;
                if early && sent > fit {
                    return Err(format!(
                        "{sent} frames of {LEN} bytes accepted into a ring of {cap} bytes \
                         that nobody read"
                    ));
                }
            } else {
                if early {
                    refused_while_paused += 1;
                }
                tx.flush().map_err(|e| e.to_string())?;
                std::thread::yield_now();
            }
        }
        tx.flush().map_err(|e| e.to_string())?;
        if frames > fit && refused_while_paused == 0 {
            return Err("the sender never found the unread ring full".into());
        }
        recv.join().map_err(|_| "receiver panicked".to_string())??;
        println!(
            "rank {me}: blocked {refused_while_paused} times on a full ring, then all \
             {frames} frames arrived in order"
        );
        Ok(())
    })?;
    drop(tx);
    mpi.barrier();
    drop(ep);
    drop(win);
    Ok(())
}

fn outbox_frame(rank: usize, from: u16, i: u64, max: usize) -> (usize, u8) {
    let mut x = (rank as u64) << 48 ^ (from as u64) << 32 ^ i;
    let len = (splitmix(&mut x) as usize) % (max + 1);
    (len, (splitmix(&mut x) & 0xff) as u8)
}

fn outbox(mpi: &Mpi, frames: u64, cap: usize, senders: u16) -> Result<(), String> {
    let n = mpi.size();
    let me = mpi.rank();
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    let hb = heartbeat_bytes(n).next_multiple_of(128);
    let ring_at = hb;
    let credit_at = ring_at + ring_region_bytes(cap);
    let win = Window::allocate(mpi, credit_at + CREDIT_BYTES).map_err(|e| e.to_string())?;
    let ep = win.lock_all().map_err(|e| e.to_string())?;
    let live = Liveness::new(mpi);
    let tx = RmaOutbox::new(
        RmaProducer::new(&ep, &live, next, ring_at, cap, credit_at).map_err(|e| e.to_string())?,
        senders as usize,
    );
    let mut rx =
        RmaConsumer::new(&ep, &live, prev, ring_at, cap, credit_at).map_err(|e| e.to_string())?;
    mpi.barrier();
    let max = (cap / 2).min(tx.max_payload());
    let total = std::thread::scope(|s| -> Result<u64, String> {
        let recv = s.spawn(move || -> Result<u64, String> {
            // Per sender: frames received, End seen.
            let mut got = vec![(0u64, false); senders as usize];
            let mut total = 0u64;
            let mut ends = 0;
            while ends < senders {
                let mut err = None;
                let r = rx.try_recv_from(&mut |kind, from, payload| {
                    let Some((i, ended)) = got.get_mut(from as usize) else {
                        err = Some(format!("frame from unknown sender {from}"));
                        return;
                    };
                    if *ended {
                        err = Some(format!("frame from sender {from} after its End"));
                    } else if kind == FrameKind::End {
                        if *i != frames {
                            err = Some(format!("sender {from}: End after {i} frames"));
                        }
                        *ended = true;
                        ends += 1;
                    } else {
                        let (len, fill) = outbox_frame(prev, from, *i, max);
                        if kind != FrameKind::Data || payload.len() != len {
                            err = Some(format!(
                                "sender {from} frame {i}: {kind:?} of {} bytes, expected Data \
                                 of {len}",
                                payload.len()
                            ));
                        } else if payload
                            .iter()
                            .enumerate()
                            .any(|(j, &b)| b != fill.wrapping_add(j as u8))
                        {
                            err = Some(format!("sender {from} frame {i}: bytes differ"));
                        }
                        *i += 1;
                        total += 1;
                    }
                });
                match r {
                    Ok(true) => {
                        if let Some(e) = err {
                            return Err(e);
                        }
                        rx.release().map_err(|e| e.to_string())?;
                    }
                    Ok(false) => std::thread::yield_now(),
                    Err(e) => return Err(format!("receive after {total} frames: {e}")),
                }
            }
            Ok(total)
        });
        let sends: Vec<_> = (0..senders)
            .map(|from| {
                let mut tx = tx.sender(from);
                s.spawn(move || -> Result<(), String> {
                    for i in 0..=frames {
                        let (kind, len, fill) = if i == frames {
                            (FrameKind::End, 0, 0)
                        } else {
                            let (len, fill) = outbox_frame(me, from, i, max);
                            (FrameKind::Data, len, fill)
                        };
                        while !tx
                            .try_send(kind, len, &mut |buf| {
                                for (j, b) in buf[..len].iter_mut().enumerate() {
                                    *b = fill.wrapping_add(j as u8);
                                }
                                Some(len)
                            })
                            .map_err(|e| e.to_string())?
                        {
                            tx.flush().map_err(|e| e.to_string())?;
                            std::thread::yield_now();
                        }
                        if i % 8 == 7 {
                            tx.flush().map_err(|e| e.to_string())?;
                        }
                    }
                    tx.flush().map_err(|e| e.to_string())
                })
            })
            .collect();
        for h in sends {
            h.join().map_err(|_| "sender panicked".to_string())??;
        }
        recv.join().map_err(|_| "receiver panicked".to_string())?
    })?;
    if total != frames * senders as u64 {
        return Err(format!("received {total} data frames"));
    }
    drop(tx);
    mpi.barrier();
    drop(ep);
    drop(win);
    println!("rank {me}: received {total} frames from {senders} senders of rank {prev}");
    Ok(())
}

/// Rough put bandwidth: 1 MiB put + flush from a Vec and from this rank's
/// own window memory (registered), rank 0 to rank 1.
fn putbw(mpi: &Mpi) -> Result<(), String> {
    let n = 1 << 20;
    let win = Window::allocate(mpi, 2 * n).map_err(|e| e.to_string())?;
    let ep = win.lock_all().map_err(|e| e.to_string())?;
    mpi.barrier();
    if mpi.rank() == 0 {
        let v = vec![1u8; n];
        for round in 0..2 {
            let t = std::time::Instant::now();
            for _ in 0..200 {
                ep.put(&v, 1, 0)
                    .and_then(|p| p.flush())
                    .map_err(|e| e.to_string())?;
            }
            let vec_gbs = 200.0 * n as f64 / t.elapsed().as_secs_f64() / 1e9;
            // SAFETY: the second half of this rank's part is not a put target.
            let own = unsafe { std::slice::from_raw_parts(win.base().add(n), n) };
            let t = std::time::Instant::now();
            for _ in 0..200 {
                ep.put(own, 1, 0)
                    .and_then(|p| p.flush())
                    .map_err(|e| e.to_string())?;
            }
            let win_gbs = 200.0 * n as f64 / t.elapsed().as_secs_f64() / 1e9;
            let t = std::time::Instant::now();
            let mut dst = vec![0u8; n];
            for _ in 0..200 {
                dst.copy_from_slice(&v);
                std::hint::black_box(&dst);
            }
            let cp = 200.0 * n as f64 / t.elapsed().as_secs_f64() / 1e9;
            println!("round {round}: put+flush 1 MiB from Vec {vec_gbs:.1} GB/s, from window {win_gbs:.1} GB/s, memcpy {cp:.1} GB/s");
        }
    }
    mpi.barrier();
    Ok(())
}
