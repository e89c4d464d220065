//! End-to-end tests of `air run --metrics HOST:PORT`: a paced YSB job
//! serves the Prometheus text format while it runs; two scrapes show
//! growing counters, and `promtool check metrics` (Debian's `prometheus`
//! package; the tests fail without it) accepts the text. Bad values are
//! refused before the run. Under MPI (feature `mpi`) each rank serves its
//! own port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// A paced YSB job of a few seconds with 1 s windows.
const PACED: [&str; 8] = [
    "--rate",
    "100000",
    "--duration",
    "5",
    "--window-ms",
    "1000",
    "--metrics",
    "127.0.0.1:0",
];

/// A running `air` whose standard error is read by a thread: the metrics
/// addresses it announces come through `addrs`, every line into `err`.
struct Running {
    child: Child,
    addrs: mpsc::Receiver<(usize, SocketAddr)>,
    err: std::thread::JoinHandle<String>,
}

fn spawn(mut cmd: Command) -> Running {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start air");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, addrs) = mpsc::channel();
    let err = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            // "air: rank R serves live metrics at http://ADDR/metrics"
            if let Some(rest) = line.strip_prefix("air: rank ") {
                let rank = rest.split(' ').next().and_then(|r| r.parse().ok());
                let addr = rest
                    .split("http://")
                    .nth(1)
                    .and_then(|a| a.strip_suffix("/metrics"))
                    .and_then(|a| a.parse().ok());
                if let (Some(r), Some(a)) = (rank, addr) {
                    let _ = tx.send((r, a));
                }
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    Running { child, addrs, err }
}

impl Running {
    /// The addresses of `n` ranks, by rank (waits up to 60 s).
    fn addrs(&mut self, n: usize) -> Vec<SocketAddr> {
        let mut got = vec![None; n];
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.iter().any(|a| a.is_none()) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.addrs.recv_timeout(left) {
                Ok((r, a)) => got[r] = Some(a),
                Err(e) => {
                    let _ = self.child.kill();
                    let status = self.child.wait().map(|s| s.to_string());
                    // The reader thread ends when air's stderr closes.
                    let err = std::mem::replace(&mut self.err, std::thread::spawn(String::new))
                        .join()
                        .unwrap_or_default();
                    panic!(
                        "air announced no metrics address for every rank ({e}): {got:?}; \
                         air: {status:?}; its standard error:\n{err}"
                    );
                }
            }
        }
        got.into_iter().map(|a| a.unwrap()).collect()
    }

    /// Waits for the end; asserts success; returns standard error.
    fn finish(mut self) -> String {
        let status = self.child.wait().expect("wait for air");
        let err = self.err.join().expect("stderr reader");
        assert!(status.success(), "air failed ({status}): {err}");
        err
    }
}

/// `GET /metrics` at `addr`: (status line, content type, body).
fn scrape(addr: SocketAddr) -> (String, String, String) {
    let mut c = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).expect("read the response");
    let (head, body) = r.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.lines().next().unwrap_or("").to_string();
    let ctype = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, ctype, body.to_string())
}

/// The sum of every sample of family `name` (labels ignored), and how many
/// samples it has.
fn sum(text: &str, name: &str) -> (f64, usize) {
    let mut s = 0.0;
    let mut n = 0;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (metric, value) = l.rsplit_once(' ').expect("a sample line");
        let base = metric.split('{').next().unwrap();
        if base == name {
            s += value.parse::<f64>().expect("a number");
            n += 1;
        }
    }
    (s, n)
}

/// Runs `promtool check metrics` on `text` and asserts it passes (with no
/// lint problem either). Fails, not skips, without promtool.
fn promtool_check(text: &str) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (apt-get install prometheus): the metrics test needs it");
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "promtool check metrics: {said}\n{text}");
    assert!(said.trim().is_empty(), "promtool check metrics: {said}");
}

/// Two scrapes of one endpoint, 1.5 s apart, once the job has read events.
fn two_scrapes(addr: SocketAddr) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let (status, ctype, body) = scrape(addr);
        assert!(status.contains(" 200"), "{status}");
        assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
        if sum(&body, "air_source_records_total").0 > 0.0 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no records read after 30 s:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_millis(1500));
    (first, scrape(addr).2)
}

/// Counters of the second scrape exceed the first's; the watermark is
/// recent wall-clock time (YSB's paced event times) and a window fired.
fn assert_grew(a: &str, b: &str, workers: usize) {
    for fam in [
        "air_source_records_total",
        "air_records_out_total",
        "air_bytes_out_total",
        "air_batches_out_total",
        "air_records_in_total",
        "air_bytes_in_total",
    ] {
        let (x, n) = sum(a, fam);
        let (y, _) = sum(b, fam);
        assert!(n >= workers, "{fam}: {n} samples\n{a}");
        assert!(y > x, "{fam} did not grow: {x} then {y}\n{b}");
    }
    let (fired, _) = sum(b, "air_windows_fired_total");
    assert!(fired >= 1.0, "no window fired in 2 s of 1 s windows:\n{b}");
    let (workers_seen, _) = sum(b, "air_workers");
    assert_eq!(workers_seen as usize, workers, "{b}");
    let (rss, _) = sum(b, "air_peak_resident_bytes");
    assert!(rss > 1e6, "peak RSS {rss}");
    // Every worker has a watermark on the exchange edge, less than the
    // window's 1 s plus the default out-of-orderness and ticks behind.
    let lags: Vec<f64> = b
        .lines()
        .filter(|l| l.starts_with("air_watermark_lag_seconds{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert!(lags.len() >= workers, "{b}");
    assert!(lags.iter().all(|&l| (-1.0..10.0).contains(&l)), "{lags:?}");
    for l in b
        .lines()
        .filter(|l| l.starts_with("air_ring_full_waits_total{"))
    {
        assert!(l.contains("tier=\""), "{l}");
    }
}

#[test]
fn a_paced_job_serves_growing_counters_that_promtool_accepts() {
    let mut cmd = Command::new(AIR);
    cmd.args(["run", "ysb", "--workers", "2", "--no-pin"])
        .args(PACED);
    let mut run = spawn(cmd);
    let addr = run.addrs(1)[0];
    assert!(addr.ip().is_loopback(), "{addr}");
    let (a, b) = two_scrapes(addr);
    assert!(a.contains("rank=\"0\""), "{a}");
    assert_grew(&a, &b, 2);
    // Ring occupancy: every worker has input rings (at least 64 KiB each)
    // and their occupancy is a fraction.
    let (cap, n) = sum(&b, "air_input_ring_bytes");
    assert!(
        n >= 2 && cap >= (n * 65536) as f64,
        "{n} samples, {cap} bytes: {b}"
    );
    let ratios: Vec<f64> = b
        .lines()
        .filter_map(|l| l.strip_prefix("air_input_ring_occupancy_ratio{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(ratios.len(), n, "{b}");
    assert!(ratios.iter().all(|r| (0.0..=1.0).contains(r)), "{ratios:?}");
    promtool_check(&b);
    // Other paths are not found; the server speaks HTTP, not this test.
    let mut c = TcpStream::connect(addr).unwrap();
    write!(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    run.finish();
    // The job ended: the endpoint is gone with it.
    assert!(TcpStream::connect(addr).is_err());
}

/// Refused with exit code 2 and a message naming the option, quickly (the
/// job would read for a minute).
fn assert_refused(metrics: &str, says: &str) {
    let t = Instant::now();
    let o = Command::new(AIR)
        .args(["run", "ysb", "--workers", "1", "--no-pin", "--rate", "1000"])
        .args(["--duration", "60", "--metrics", metrics])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "--metrics {metrics}: {err}");
    // Bad values (clap's checks) and unusable addresses (air's) read alike.
    assert!(err.starts_with("air: error: "), "{err}");
    assert!(err.contains("--metrics"), "{err}");
    assert!(err.contains(says), "--metrics {metrics}: {err}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

#[test]
fn bad_metrics_addresses_are_refused_before_the_run() {
    assert_refused("9400", "HOST:PORT");
    assert_refused("127.0.0.1", "HOST:PORT");
    assert_refused(":9400", "HOST:PORT");
    assert_refused("127.0.0.1:99999", "bad port");
    assert_refused("127.0.0.1:http", "bad port");
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    assert_refused(&format!("127.0.0.1:{port}"), "cannot listen");
    drop(held);
}

/// Under `mpirun -np 2` each rank serves its own endpoint, labelled with
/// its rank, with its own workers' growing counters.
#[cfg(feature = "mpi")]
#[test]
fn each_rank_serves_its_own_endpoint() {
    let mut cmd = air_rdma::mpirun_command(2);
    cmd.arg(AIR)
        .args(["run", "ysb", "--workers", "1", "--no-pin"])
        .args(PACED);
    let mut run = spawn(cmd);
    let addrs = run.addrs(2);
    assert_ne!(addrs[0], addrs[1]);
    for (rank, addr) in addrs.iter().enumerate() {
        let (a, b) = two_scrapes(*addr);
        assert!(
            b.contains(&format!("air_workers{{rank=\"{rank}\"}} 1")),
            "{b}"
        );
        // Worker labels are global: rank r's worker is r.
        assert!(
            b.contains(&format!(
                "air_source_records_total{{rank=\"{rank}\",worker=\"{rank}\"}}"
            )),
            "{b}"
        );
        assert_grew(&a, &b, 1);
        assert!(b.contains("tier=\"node\""), "{b}");
        promtool_check(&b);
    }
    run.finish();
}

/// `PORT + rank`: with a fixed port, rank 1 listens one above rank 0.
#[cfg(feature = "mpi")]
#[test]
fn ranks_listen_on_port_plus_rank() {
    // Two free ports in a row, found by binding (released just before the
    // run; another process could take them meanwhile, which would fail
    // the test loudly, not wrongly).
    let base = (0..50)
        .find_map(|_| {
            let a = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            let p = a.local_addr().ok()?.port();
            let _b = std::net::TcpListener::bind(("127.0.0.1", p.checked_add(1)?)).ok()?;
            Some(p)
        })
        .expect("two free consecutive ports");
    let mut cmd = air_rdma::mpirun_command(2);
    let metrics = format!("127.0.0.1:{base}");
    cmd.arg(AIR)
        .args(["run", "ysb", "--workers", "1", "--no-pin"])
        .args(["--rate", "50000", "--duration", "2", "--metrics", &metrics]);
    let mut run = spawn(cmd);
    let addrs = run.addrs(2);
    assert_eq!(addrs[0].port(), base);
    assert_eq!(addrs[1].port(), base + 1);
    run.finish();
}
