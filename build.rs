//! Probes the system for what the enabled features need and explains what
//! to install when something is missing (before a dependency's build script
//! fails with a less helpful message).
//!
//! Feature `mpi`: an MPI (MPICH by default; Open MPI works too) and libclang
//! (mpi-sys generates its bindings with bindgen). Feature `hwloc`: libhwloc
//! 2.x with its pkg-config file (hwloc2's build script does not fail without
//! it; the link would).

use std::path::Path;
use std::process::Command;

const APT: &str = "apt-get install -y --no-install-recommends mpich libmpich-dev libclang-dev";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rerun-if-env-changed=MPI_PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");
    if std::env::var_os("CARGO_FEATURE_HWLOC").is_some()
        && !runs("pkg-config", &["--atleast-version=2.0.0", "hwloc"])
    {
        panic!(
            "\n\nthe `hwloc` feature needs libhwloc 2.x and pkg-config.\nOn Debian/Ubuntu, as \
             root:\n    apt-get install -y --no-install-recommends libhwloc-dev pkg-config\n\
             Without the feature, placement reads the machine from /sys.\n"
        );
    }
    if std::env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    let mut missing = Vec::new();
    if !mpi_found() {
        missing.push("an MPI library with its compiler wrapper (mpicc) or pkg-config file");
    }
    if !libclang_found() {
        missing.push("libclang (bindgen needs it to read mpi.h)");
    }
    if !missing.is_empty() {
        panic!(
            "\n\nthe `mpi` feature needs {}.\nOn Debian/Ubuntu, as root:\n    {APT}\n\
             (Open MPI: openmpi-bin libopenmpi-dev, then build with MPICC=mpicc.openmpi.)\n\
             Without the feature, `cargo build --release` needs no system package.\n",
            missing.join(" and ")
        );
    }
}

fn runs(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn mpi_found() -> bool {
    if let Ok(pc) = std::env::var("MPI_PKG_CONFIG") {
        return runs("pkg-config", &["--exists", &pc]);
    }
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    runs(&mpicc, &["-show"])
        || runs("pkg-config", &["--exists", "mpich"])
        || runs("pkg-config", &["--exists", "ompi"])
}

fn libclang_found() -> bool {
    if let Ok(dir) = std::env::var("LIBCLANG_PATH") {
        return has_libclang(Path::new(&dir));
    }
    let mut dirs: Vec<std::path::PathBuf> = vec![
        "/usr/lib/x86_64-linux-gnu".into(),
        "/usr/lib/aarch64-linux-gnu".into(),
        "/usr/lib64".into(),
        "/usr/lib".into(),
        "/usr/local/lib".into(),
    ];
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("llvm-") {
                dirs.push(e.path().join("lib"));
            }
        }
    }
    dirs.iter().any(|d| has_libclang(d))
}

fn has_libclang(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("libclang") && n.contains(".so")
            })
        })
        .unwrap_or(false)
}
