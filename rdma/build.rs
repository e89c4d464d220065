//! Builds the C shim (`csrc/shim.c`) with the MPI that mpi-sys links, and
//! explains what to install when no MPI (or no libclang, which mpi-sys's
//! bindgen needs) is found.

const APT: &str = "apt-get install -y --no-install-recommends mpich libmpich-dev libclang-dev";

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rerun-if-env-changed=MPI_PKG_CONFIG");
    let lib = match build_probe_mpi::probe() {
        Ok(lib) => lib,
        Err(errs) => {
            let reasons: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            panic!(
                "\n\nair-rdma: no MPI library found (needed by the `mpi` feature).\n\
                 Install one, e.g. on Debian/Ubuntu:\n    {APT}\n\
                 (Open MPI works too: openmpi-bin libopenmpi-dev; point MPICC or MPI_PKG_CONFIG at it.)\n\
                 Probe said:\n  {}\n",
                reasons.join("\n  ")
            );
        }
    };
    let mut cc = cc::Build::new();
    cc.file("csrc/shim.c");
    match &lib.mpicc {
        Some(mpicc) => {
            cc.compiler(mpicc);
        }
        None => {
            for inc in &lib.include_paths {
                cc.include(inc);
            }
        }
    }
    cc.compile("air_rdma_shim");
}
