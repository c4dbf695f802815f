//! A file's bytes read in place from the page cache.
//!
//! Loading a checkpoint reads every byte of a file that is, after a process
//! crash, usually still in the page cache. `pread` copies each byte into a
//! buffer first; that copy measured about 6% of a 5M-record load's CPU
//! (`docs/durability.md`, "Restart"). A shared read-only mapping hands the
//! cached pages over instead.
//!
//! A mapped read that meets a disk error is a SIGBUS, not an error the
//! loader can answer by falling back to an older checkpoint. So a range is
//! read in place only when every one of its pages is already in memory
//! ([`Mapped::resident`], `mincore`), when no read needs the disk; the rest
//! is read with `pread`. If pages are reclaimed between that check and the
//! read and the disk then fails, the process dies; the next start finds
//! them no longer resident and reads them with `pread`, which reports the
//! error, so the server still comes back.

use std::fs::File;

/// A whole file mapped read-only; unmapped on drop.
pub struct Mapped {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; shared
// references only read it.
unsafe impl Send for Mapped {}
// SAFETY: as above: nothing writes through the mapping.
unsafe impl Sync for Mapped {}

impl std::ops::Deref for Mapped {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped, once.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

impl Mapped {
    /// Whether every page of `[offset, offset + len)` is in the page cache
    /// now, so that reading it in place needs no disk read. A range outside
    /// the mapping, or a failed check, is not resident.
    #[cfg(target_os = "linux")]
    pub fn resident(&self, offset: usize, len: usize) -> bool {
        let Some(end) = offset.checked_add(len).filter(|&e| e <= self.len) else {
            return false;
        };
        if len == 0 {
            return true;
        }
        // SAFETY: sysconf has no preconditions.
        let Some(page) = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|&p| p > 0)
        else {
            return false;
        };
        let start = offset / page * page;
        let mut pages = vec![0u8; (end - start).div_ceil(page)];
        // SAFETY: `start` is page-aligned (the mapping starts on a page) and
        // `[start, end)` lies inside the live mapping; `pages` has one byte
        // per page of it, as mincore requires.
        let r = unsafe {
            libc::mincore(
                self.ptr.add(start) as *mut libc::c_void,
                end - start,
                pages.as_mut_ptr(),
            )
        };
        r == 0 && pages.iter().all(|b| b & 1 == 1)
    }

    #[cfg(not(target_os = "linux"))]
    pub fn resident(&self, _offset: usize, _len: usize) -> bool {
        false
    }
}

/// Maps `file` (`len` bytes) read-only. Read only the ranges
/// [`Mapped::resident`] vouches for through it.
#[cfg(target_os = "linux")]
pub fn map(file: &File, len: u64) -> Option<Mapped> {
    use std::os::fd::AsRawFd;
    let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
    // SAFETY: a fresh read-only shared mapping of an open file; the kernel
    // picks the address. Failure is checked below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    Some(Mapped {
        ptr: ptr as *const u8,
        len,
    })
}

#[cfg(not(target_os = "linux"))]
pub fn map(_file: &File, _len: u64) -> Option<Mapped> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_cached_file_maps_to_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&bytes)
            .unwrap();
        // Just written: in the page cache.
        let f = File::open(&path).unwrap();
        let m = map(&f, bytes.len() as u64).expect("mapped");
        assert_eq!(&m[..], &bytes[..]);
        assert!(m.resident(0, bytes.len()));
        assert!(m.resident(4095, 2), "a range across a page boundary");
        assert!(m.resident(19_999, 1) && m.resident(20_000, 0));
        assert!(!m.resident(19_999, 2), "a range past the end");
        assert!(!m.resident(usize::MAX, 2));
        assert!(map(&f, 0).is_none());
    }
}
