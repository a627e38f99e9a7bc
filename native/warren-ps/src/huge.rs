//! Large arrays on huge pages (Linux transparent huge pages, asked for with
//! `madvise(MADV_HUGEPAGE)`). A sparse table's index, rows and row counts are tens of MiB read
//! at random: with 4 KiB pages nearly every access also misses the TLB and waits on a page
//! walk, and a profile of the row work had most of the time of finding a row on the prefetch
//! of its index slot. With 2 MiB pages, 64 MiB is 32 TLB entries.
//!
//! Only advice: where the kernel gives no huge pages (transparent huge pages `never`, not
//! Linux), nothing changes but the speed.

/// Bytes in a huge page (x86-64, and aarch64 with 4 KiB base pages).
const HUGE: usize = 2 << 20;

/// Asks the kernel to back the whole huge pages inside `v`'s allocation with huge pages. Pages
/// already touched stay as they are (until the kernel's `khugepaged` merges them), so advise
/// an allocation before filling it.
pub(crate) fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity() * size_of::<T>();
    let start = v.as_ptr() as usize;
    let (from, to) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
    if to > from {
        #[cfg(target_os = "linux")]
        // SAFETY: the range lies inside `v`'s allocation; MADV_HUGEPAGE changes how its pages
        // are backed, never their contents. A failure (no THP support) is harmless.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// Makes room for `additional` more elements in `v`, as `Vec::reserve` does (at least doubling
/// the capacity), with the new allocation advised ([`advise`]) before the elements are copied
/// into it, so that its pages are huge from the start.
pub(crate) fn reserve<T: Copy>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() >= additional {
        return;
    }
    let mut bigger = Vec::with_capacity((v.len() + additional).max(2 * v.capacity()).max(4));
    advise(&bigger);
    bigger.extend_from_slice(v);
    *v = bigger;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_keeps_the_elements_and_doubles() {
        let mut v: Vec<u64> = Vec::new();
        for i in 0..(3 << 20) {
            reserve(&mut v, 1);
            v.push(i);
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        assert!(v.capacity() < 2 * v.len() + 4, "grows by doubling, not more");
        let (cap, room) = (v.capacity(), v.capacity() - v.len());
        reserve(&mut v, room);
        assert_eq!(v.capacity(), cap, "no new allocation while there is room");
    }

    /// On Linux with transparent huge pages on `always` or `madvise`, a large advised array
    /// ends up (at least partly) on huge pages: the process's `AnonHugePages` grows.
    #[test]
    #[cfg(target_os = "linux")]
    fn an_advised_array_gets_huge_pages_where_the_kernel_gives_them() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        if !(thp.contains("[always]") || thp.contains("[madvise]")) {
            eprintln!("transparent huge pages are off here ({thp:?}): nothing to check");
            return;
        }
        let huge = || -> u64 {
            let smaps = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
            let line = smaps.lines().find(|l| l.starts_with("AnonHugePages:")).unwrap_or("AnonHugePages: 0 kB");
            line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
        };
        let before = huge();
        let mut v: Vec<u8> = Vec::new();
        reserve(&mut v, 64 << 20);
        v.resize(64 << 20, 1);
        let after = huge();
        assert!(after >= before + 8 * 1024, "AnonHugePages {before} kB -> {after} kB for a 64 MiB array");
        assert_eq!(v.iter().map(|&b| u64::from(b)).sum::<u64>(), 64 << 20);
    }
}
