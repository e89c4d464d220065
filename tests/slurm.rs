#![cfg(feature = "mpi")]
//! `air` under a real one-node SLURM cluster (slurm-wlm 22.05 + munge) that
//! each test starts in a temp dir and stops again:
//!
//! - `srun_matches_embedded`: `srun -n 2 --mpi=pmi2` gives the same CSV as
//!   the embedded job with as many workers, and the report says 2 ranks;
//! - `srun_rank_killed_ends_job`: a rank killed with SIGKILL mid-run is
//!   noticed by the others ("rank 1 is lost"), srun exits non-zero within
//!   10 s, and no `/dev/shm/air-*` segment of the job is left.
//!
//! Opt-in: runs only with `AIR_TEST_SLURM=1`, as root, with `slurmctld`,
//! `slurmd`, `srun`, `sinfo`, `munged` installed (Debian: `apt-get install
//! --no-install-recommends slurm-wlm munge`); otherwise each test prints why
//! it is skipped and passes. Nothing under /etc is used or changed: the
//! cluster has its own `slurm.conf` (`SLURM_CONF`), its own munge key and
//! socket, and ports that were free when it started.
//!
//! `AIR_TEST_SLURM=1 cargo test --release --features mpi --test slurm -- --nocapture`

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// How long the node may take to become idle after the daemons started.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound of a whole `srun` job (the jobs here take well under 10 s).
const JOB_TIMEOUT: Duration = Duration::from_secs(180);

/// Tests of this file run one after the other: each starts its own cluster
/// on the same node name, and 2 cores are enough for one job at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------- helpers

/// `name` in `$PATH` or in the sbin directories (daemons live there and a
/// CI's `$PATH` may lack them).
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The tools the cluster needs, or why the test is skipped.
struct Tools {
    slurmctld: PathBuf,
    slurmd: PathBuf,
    srun: PathBuf,
    sinfo: PathBuf,
    scancel: PathBuf,
    munged: PathBuf,
    mungekey: PathBuf,
    runuser: PathBuf,
}

/// `Some(tools)` when the test should run; else prints why it is skipped.
fn opted_in(test: &str) -> Option<Tools> {
    let skip = |why: String| {
        eprintln!("skipped: slurm::{test}: {why}");
        None
    };
    if std::env::var("AIR_TEST_SLURM").as_deref() != Ok("1") {
        return skip("set AIR_TEST_SLURM=1 to run the SLURM tests (they start slurmctld, slurmd and munged; root)".into());
    }
    if which("slurmctld").is_none() {
        return skip("slurmctld is not installed (Debian: apt-get install --no-install-recommends slurm-wlm munge)".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("needs root (slurmd runs as root, munged as user munge)".into());
    }
    let mut missing = Vec::new();
    let mut find = |n: &str| {
        which(n).unwrap_or_else(|| {
            missing.push(n.to_string());
            PathBuf::new()
        })
    };
    let tools = Tools {
        slurmctld: find("slurmctld"),
        slurmd: find("slurmd"),
        srun: find("srun"),
        sinfo: find("sinfo"),
        scancel: find("scancel"),
        munged: find("munged"),
        mungekey: find("mungekey"),
        runuser: find("runuser"),
    };
    if !missing.is_empty() {
        return skip(format!("not installed: {}", missing.join(", ")));
    }
    if user_ids("munge").is_none() {
        return skip("there is no user `munge` (it comes with the munge package)".into());
    }
    Some(tools)
}

/// uid and gid of a user.
fn user_ids(name: &str) -> Option<(libc::uid_t, libc::gid_t)> {
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam gets a valid C string; the result is read at once,
    // before any other call that could reuse its static buffer.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        None
    } else {
        // SAFETY: pw is non-null and points to a passwd record.
        Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
    }
}

fn chown(path: &Path, (uid, gid): (libc::uid_t, libc::gid_t)) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// This host's short name, as slurmd names its node.
fn short_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(rc, 0, "gethostname");
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let full = String::from_utf8_lossy(&buf[..end]).into_owned();
    full.split('.').next().unwrap_or("localhost").to_string()
}

/// A TCP port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free port")
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// The last `n` lines of a file (for failure messages).
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("({e})"));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A process that exists and is not a zombie.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => false,
    }
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn environ(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Output of a child whose pipes are read on threads while it runs.
struct Running {
    child: Child,
    out: Option<std::thread::JoinHandle<String>>,
    err: Option<std::thread::JoinHandle<String>>,
}

fn spawn(cmd: &mut Command) -> Running {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    Running {
        child,
        out: Some(out),
        err: Some(err),
    }
}

impl Running {
    /// Waits up to `timeout`; `None` if it is still running then.
    fn wait_for(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return Some(s);
            }
            if t0.elapsed() >= timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// (stdout, stderr), once the child has ended.
    fn output(&mut self) -> (String, String) {
        (
            self.out
                .take()
                .map(|h| h.join().unwrap())
                .unwrap_or_default(),
            self.err
                .take()
                .map(|h| h.join().unwrap())
                .unwrap_or_default(),
        )
    }

    /// Waits up to `timeout`, killing the child after it.
    fn finish(mut self, timeout: Duration, what: &str) -> (ExitStatus, String, String) {
        match self.wait_for(timeout) {
            Some(s) => {
                let (o, e) = self.output();
                (s, o, e)
            }
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let (o, e) = self.output();
                panic!(
                    "{what}: still running after {timeout:?}; killed\nstdout:\n{o}\nstderr:\n{e}"
                );
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A command with none of the launcher variables of the environment the
/// test runs in (a test started inside a SLURM allocation or under mpirun
/// must not hand its job to these commands), nor `AIR_*` settings.
fn clean_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if [
            "SLURM_", "SLURMD_", "SBATCH_", "SRUN_", "SALLOC_", "PMI_", "PMIX_", "OMPI_", "HYDRA_",
            "MPIR_", "AIR_",
        ]
        .iter()
        .any(|p| k.starts_with(p))
        {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd
}

// ---------------------------------------------------------------- cluster

/// A daemon this test started, stopped by the pid in its pid file.
struct Daemon {
    name: &'static str,
    pid_file: PathBuf,
}

/// A one-node SLURM cluster in a temp dir. Dropping it (also while a test
/// panics) cancels its jobs and stops every daemon it started, newest first.
struct Cluster {
    tools: Tools,
    node: String,
    conf: PathBuf,
    daemons: Vec<Daemon>,
    /// Dropped after the daemons are stopped (fields drop after `drop`).
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(tools: Tools) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("air-slurm-test-")
            .tempdir()
            .expect("temp dir");
        // munged (user munge) must reach its directory inside this one.
        set_mode(dir.path(), 0o755);
        let node = short_hostname();
        let mut c = Cluster {
            tools,
            node,
            conf: dir.path().join("slurm.conf"),
            daemons: Vec::new(),
            dir,
        };
        let t0 = Instant::now();
        c.start_munged();
        c.write_conf();
        for d in ["slurmctld", "slurmd"] {
            std::fs::create_dir_all(c.path(&format!("{d}.state"))).unwrap();
        }
        let (ctld, slurmd) = (c.tools.slurmctld.clone(), c.tools.slurmd.clone());
        c.start_daemon("slurmctld", &ctld, "slurmctld.pid");
        c.start_daemon("slurmd", &slurmd, "slurmd.pid");
        c.wait_idle();
        eprintln!(
            "slurm: node {} idle {:.1} s after start (conf {})",
            c.node,
            t0.elapsed().as_secs_f64(),
            c.conf.display()
        );
        c
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn munge_socket(&self) -> PathBuf {
        self.path("munge/munge.socket")
    }

    /// munged as user munge, with its own key and socket in the temp dir.
    fn start_munged(&mut self) {
        let munge = user_ids("munge").expect("user munge");
        let mdir = self.path("munge");
        std::fs::create_dir(&mdir).unwrap();
        chown(&mdir, munge);
        // munged wants the socket's directory searchable by all.
        set_mode(&mdir, 0o755);
        let key = mdir.join("munge.key");
        let out = Command::new(&self.tools.runuser)
            .args(["-u", "munge", "--"])
            .arg(&self.tools.mungekey)
            .arg("--create")
            .arg(format!("--keyfile={}", key.display()))
            .output()
            .expect("run mungekey");
        assert!(
            out.status.success(),
            "mungekey: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Registered before it starts: a daemon that got as far as writing
        // its pid file is stopped even if its start is reported failed.
        self.daemons.push(Daemon {
            name: "munged",
            pid_file: mdir.join("munged.pid"),
        });
        let out = Command::new(&self.tools.runuser)
            .args(["-u", "munge", "--"])
            .arg(&self.tools.munged)
            .arg(format!("--socket={}", self.munge_socket().display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", mdir.join("munged.pid").display()))
            .arg(format!("--log-file={}", mdir.join("munged.log").display()))
            .arg(format!(
                "--seed-file={}",
                mdir.join("munged.seed").display()
            ))
            .output()
            .expect("run munged");
        assert!(
            out.status.success(),
            "munged failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            tail(&mdir.join("munged.log"), 20)
        );
    }

    fn write_conf(&self) {
        let d = self.dir.path().display();
        let node = &self.node;
        let cpus = online_cpus();
        let conf = format!(
            "# One-node test cluster of tests/slurm.rs (removed when the test ends).
ClusterName=airtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket
StateSaveLocation={d}/slurmctld.state
SlurmdSpoolDir={d}/slurmd.state
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} Sockets=1 CoresPerSocket={cpus} ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
",
            ctld_port = free_port(),
            slurmd_port = free_port(),
        );
        std::fs::write(&self.conf, conf).unwrap();
    }

    /// Starts a daemon that forks into the background.
    fn start_daemon(&mut self, name: &'static str, program: &Path, pid_file: &str) {
        self.daemons.push(Daemon {
            name,
            pid_file: self.path(pid_file),
        });
        let out = clean_command(program)
            .arg("-f")
            .arg(&self.conf)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap_or_else(|e| panic!("run {name}: {e}"));
        assert!(
            out.status.success(),
            "{name} failed ({}): {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            tail(&self.path(&format!("{name}.log")), 30)
        );
    }

    /// A command of this cluster (`SLURM_CONF` set, launcher variables of
    /// the outer environment removed), run in the temp dir.
    fn command(&self, program: &Path) -> Command {
        let mut cmd = clean_command(program);
        cmd.env("SLURM_CONF", &self.conf)
            .current_dir(self.dir.path());
        cmd
    }

    fn wait_idle(&self) {
        let t0 = Instant::now();
        let mut last = String::new();
        while t0.elapsed() < IDLE_TIMEOUT {
            let out = self
                .command(&self.tools.sinfo)
                .args(["-h", "-N", "-n", &self.node, "-o", "%T"])
                .output()
                .expect("run sinfo");
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            if out.status.success() && last == "idle" {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "node {} not idle after {IDLE_TIMEOUT:?} (sinfo: {last:?})\nslurmctld.log:\n{}\nslurmd.log:\n{}",
            self.node,
            tail(&self.path("slurmctld.log"), 30),
            tail(&self.path("slurmd.log"), 30)
        );
    }

    /// `srun <args>` of this cluster, started.
    fn srun(&self, args: &[&str]) -> Running {
        spawn(self.command(&self.tools.srun).args(args))
    }

    /// Stops a daemon by its pid file: SIGTERM, then SIGKILL after 10 s.
    fn stop(d: &Daemon) {
        // A daemon started a moment ago may not have written it yet.
        let t0 = Instant::now();
        let pid = loop {
            match std::fs::read_to_string(&d.pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                Some(p) if p > 1 => break p,
                _ if t0.elapsed() > Duration::from_secs(2) => {
                    eprintln!(
                        "slurm: {}: no pid file {}; not running?",
                        d.name,
                        d.pid_file.display()
                    );
                    return;
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        // Only this daemon: a stale pid file may name another process now.
        if !alive(pid) || comm(pid) != d.name {
            return;
        }
        // SAFETY: plain signal to a process checked above.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t0 = Instant::now();
        while alive(pid) {
            if t0.elapsed() > Duration::from_secs(10) {
                eprintln!(
                    "slurm: {} (pid {pid}) ignored SIGTERM for 10 s; SIGKILL",
                    d.name
                );
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for f in ["slurmctld.log", "slurmd.log"] {
                eprintln!("---- {f} (last lines)\n{}", tail(&self.path(f), 25));
            }
        }
        // Jobs first (a step left running by a failed test would keep its
        // slurmstepd and tasks), while slurmctld still answers. Only this
        // cluster's jobs: SLURM_CONF points to its controller.
        if self.daemons.iter().any(|d| d.name == "slurmctld") {
            if let Ok(mut child) = self
                .command(&self.tools.scancel)
                .args(["--partition=debug"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            {
                let t0 = Instant::now();
                while matches!(child.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(5)
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for d in self.daemons.iter().rev() {
            Cluster::stop(d);
        }
    }
}

/// `air` processes of a job of this cluster (their environment holds its
/// `SLURM_CONF`): (pid, SLURM_PROCID, SLURM_JOB_ID, SLURM_STEP_ID).
fn job_ranks(conf: &Path) -> Vec<(i32, String, String, String)> {
    let want = format!("SLURM_CONF={}", conf.display());
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if comm(pid) != "air" || !alive(pid) {
            continue;
        }
        let env = environ(pid);
        if !env.contains(&want) {
            continue;
        }
        let get = |k: &str| {
            env.iter()
                .find_map(|v| v.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                .unwrap_or_default()
                .to_string()
        };
        found.push((
            pid,
            get("SLURM_PROCID"),
            get("SLURM_JOB_ID"),
            get("SLURM_STEP_ID"),
        ));
    }
    found
}

fn shm_names() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

// ---------------------------------------------------------------- tests

#[test]
fn srun_matches_embedded() {
    let Some(tools) = opted_in("srun_matches_embedded") else {
        return;
    };
    let _serial = serial();
    let cluster = Cluster::start(tools);
    let d = cluster.dir.path();
    let (srun_csv, srun_json, emb_csv) = (
        d.join("srun.csv"),
        d.join("srun.json"),
        d.join("embedded.csv"),
    );
    let ysb = [
        "run",
        "ysb",
        "--events",
        "2000000",
        "--event-time",
        "synthetic",
    ];

    let t0 = Instant::now();
    let mut args = vec!["-n", "2", "--mpi=pmi2", "--overcommit", AIR];
    args.extend(ysb);
    args.extend(["--workers", "1", "--out", srun_csv.to_str().unwrap()]);
    args.extend(["--report", srun_json.to_str().unwrap()]);
    let (status, out, err) = cluster.srun(&args).finish(JOB_TIMEOUT, "srun");
    eprintln!(
        "srun: {status} after {:.2} s\n{out}{err}",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        status.success(),
        "srun failed: {status}\nstdout:\n{out}\nstderr:\n{err}"
    );

    let t0 = Instant::now();
    let mut emb = clean_command(Path::new(AIR));
    emb.args(ysb)
        .args(["--workers", "2", "--out", emb_csv.to_str().unwrap()])
        .current_dir(d);
    let (status, out, err) = spawn(&mut emb).finish(JOB_TIMEOUT, "embedded air");
    eprintln!(
        "embedded: {status} after {:.2} s\n{out}{err}",
        t0.elapsed().as_secs_f64()
    );
    assert!(status.success(), "embedded run failed: {status}\n{err}");

    let a = std::fs::read(&srun_csv).expect("srun CSV");
    let b = std::fs::read(&emb_csv).expect("embedded CSV");
    assert!(!a.is_empty(), "srun CSV is empty");
    let rows = a.iter().filter(|&&c| c == b'\n').count();
    assert!(
        rows > 1,
        "srun CSV has no result rows:\n{}",
        String::from_utf8_lossy(&a)
    );
    assert!(
        a == b,
        "srun and embedded CSV differ ({} vs {} bytes)",
        a.len(),
        b.len()
    );

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&srun_json).expect("srun report"))
            .expect("report is JSON");
    assert_eq!(report["ranks"], 2, "report: {report:#}");
    eprintln!(
        "srun and embedded CSV identical ({} lines); report ranks = 2",
        rows
    );
}

#[test]
fn srun_rank_killed_ends_job() {
    let Some(tools) = opted_in("srun_rank_killed_ends_job") else {
        return;
    };
    let _serial = serial();
    let cluster = Cluster::start(tools);
    let ysb = [
        "run",
        "ysb",
        "--rate",
        "3000000",
        "--duration",
        "30",
        "--workers",
        "1",
    ];
    let mut args = vec!["-n", "3", "--mpi=pmi2", "--overcommit", AIR];
    args.extend(ysb);
    let started = Instant::now();
    let mut srun = cluster.srun(&args);

    // All three ranks up, then 3 s into the job: mid-run, past the wiring.
    let ranks = loop {
        let r = job_ranks(&cluster.conf);
        if r.len() == 3 {
            break r;
        }
        if let Some(s) = srun.wait_for(Duration::ZERO) {
            let (o, e) = srun.output();
            panic!("srun ended ({s}) before its 3 ranks were seen\nstdout:\n{o}\nstderr:\n{e}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "3 ranks not seen in 30 s: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
    let (victim, _, job, step) = ranks
        .iter()
        .find(|r| r.1 == "1")
        .cloned()
        .unwrap_or_else(|| panic!("no rank with SLURM_PROCID=1: {ranks:?}"));
    assert!(!job.is_empty(), "rank 1 has no SLURM_JOB_ID");
    assert!(
        srun.wait_for(Duration::ZERO).is_none(),
        "job ended before the kill"
    );

    // SAFETY: plain signal to the rank found above.
    assert_eq!(
        unsafe { libc::kill(victim, libc::SIGKILL) },
        0,
        "kill -9 {victim}"
    );
    let killed = Instant::now();
    let status = srun.wait_for(Duration::from_secs(10));
    let took = killed.elapsed();
    let Some(status) = status else {
        drop(srun); // kills srun; the cluster's drop cancels the job
        panic!("srun still running 10 s after rank 1 (pid {victim}) was killed");
    };
    let (out, err) = srun.output();
    eprintln!(
        "srun: {status} {:.2} s after kill -9 of rank 1 (pid {victim}, job {job}.{step})\n{out}{err}",
        took.as_secs_f64()
    );
    assert!(!status.success(), "srun exited 0 after a rank was killed");
    assert!(
        err.contains("rank 1 is lost"),
        "no rank reported rank 1 lost; stderr:\n{err}"
    );

    // Segments are named air-<uid>-<job>-<channel>, job = <jobid>.<stepid>.
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mine = |n: &String| {
        n.starts_with(&format!("air-{uid}-{job}.")) || n.starts_with(&format!("air-{uid}-{job}-"))
    };
    let left: Vec<String> = shm_names().into_iter().filter(mine).collect();
    assert!(
        left.is_empty(),
        "/dev/shm holds segments of job {job}: {left:?}"
    );

    // No rank outlives its step.
    let t0 = Instant::now();
    while !job_ranks(&cluster.conf).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "ranks still running 5 s after srun ended: {:?}",
            job_ranks(&cluster.conf)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
