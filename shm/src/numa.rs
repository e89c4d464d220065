//! Where memory lives: the NUMA node of a page, as the kernel reports it.

/// The NUMA node holding the page that contains `addr`, from
/// `get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)` (Linux). A page not yet
/// touched is allocated by the query (on the calling thread's node, as a
/// first touch would), so ask only about memory already written.
///
/// Returns `None` when the kernel refuses (no NUMA support, a seccomp
/// filter, as in some containers) or on other platforms.
pub fn node_of(addr: *const u8) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        const MPOL_F_NODE: libc::c_ulong = 1;
        const MPOL_F_ADDR: libc::c_ulong = 2;
        // Only the address is passed: the kernel looks it up, nothing is
        // dereferenced here.
        let addr = addr as usize;
        let mut node: libc::c_int = -1;
        // SAFETY: get_mempolicy writes one int to `node`; with a null nodemask
        // and maxnode 0 it writes nothing else; `addr` is only looked up (it
        // must be mapped, else the call fails with EFAULT).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut node as *mut libc::c_int,
                std::ptr::null_mut::<libc::c_ulong>(),
                0 as libc::c_ulong,
                addr,
                MPOL_F_NODE | MPOL_F_ADDR,
            )
        };
        (rc == 0 && node >= 0).then_some(node as usize)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = addr;
        None
    }
}

/// The NUMA node of the calling thread's current CPU (`getcpu`), if known.
pub fn current_node() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        let (mut cpu, mut node): (libc::c_uint, libc::c_uint) = (0, 0);
        // SAFETY: getcpu writes one unsigned int to each pointer; the third
        // argument is unused by the kernel and may be null.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_getcpu,
                &mut cpu as *mut libc::c_uint,
                &mut node as *mut libc::c_uint,
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        (rc == 0).then_some(node as usize)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Moves the whole pages inside `[addr, addr + len)` that are not on the
/// calling thread's NUMA node to it (`move_pages(2)`, `MPOL_MF_MOVE`), for
/// memory another thread touched first (an MPI window zeroed by the main
/// thread). Every page is checked (one query for all), so a range that
/// starts local but continues elsewhere is moved too. Returns the node of
/// the first page afterwards; nothing moves on a machine with one node.
pub fn bring_here(addr: *const u8, len: usize) -> Option<usize> {
    let here = current_node()?;
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no memory effects.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(1);
        let start = (addr as usize).div_ceil(page) * page;
        let end = (addr as usize + len) / page * page;
        let pages: Vec<usize> = (start..end).step_by(page).collect();
        if !pages.is_empty() {
            const MPOL_MF_MOVE: libc::c_int = 1 << 1;
            let mut status = vec![-1 as libc::c_int; pages.len()];
            // Where each page is now (nodes = NULL: query only).
            // SAFETY: `pages` and `status` hold `pages.len()` elements; the
            // kernel reads the first and writes the second; addresses are
            // only looked up.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_move_pages,
                    0 as libc::c_int,
                    pages.len() as libc::c_ulong,
                    pages.as_ptr(),
                    std::ptr::null::<libc::c_int>(),
                    status.as_mut_ptr(),
                    0 as libc::c_int,
                )
            };
            let away: Vec<usize> = pages
                .iter()
                .zip(&status)
                .filter(|&(_, &st)| rc == 0 && st >= 0 && st as usize != here)
                .map(|(&p, _)| p)
                .collect();
            if !away.is_empty() {
                let nodes = vec![here as libc::c_int; away.len()];
                let mut st = vec![0 as libc::c_int; away.len()];
                // SAFETY: as above; `nodes` holds `away.len()` targets.
                unsafe {
                    libc::syscall(
                        libc::SYS_move_pages,
                        0 as libc::c_int,
                        away.len() as libc::c_ulong,
                        away.as_ptr(),
                        nodes.as_ptr(),
                        st.as_mut_ptr(),
                        MPOL_MF_MOVE,
                    );
                }
            }
        }
    }
    node_of(addr)
}
