//! Copying from another process's memory with one system call (`process_vm_readv`, "cross
//! memory attach"): how a shared-memory link moves a large transfer with one copy instead of
//! two through a ring. The kernel allows it between processes of the same user unless a
//! ptrace restriction (Yama, a seccomp filter, another PID namespace) forbids it, so each end
//! probes once per link before its peer may lend it anything.

use std::io;

/// Copies `buf.len()` bytes (or fewer, if the kernel stops early) from address `addr` of
/// process `pid` into `buf`. Returns the bytes copied.
pub(crate) fn read(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as usize as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: `local` describes `buf`, ours and writable for its length; the remote range is
    // only read, by the kernel, which checks it against the other process's mappings.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_from_a_process_and_names_a_bad_address() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let pid = std::process::id() as i32;
        match read(pid, src.as_ptr() as u64, &mut dst) {
            Ok(n) => {
                assert_eq!(n, src.len());
                assert_eq!(dst, src);
                let e = read(pid, 8, &mut dst[..8]).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{e}");
            }
            // A kernel or sandbox without cross-memory attach: the links use their rings.
            Err(e) => assert!(matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)), "{e}"),
        }
    }
}
