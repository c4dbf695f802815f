//! A file's bytes read in place from the page cache.
//!
//! Loading a checkpoint reads every byte of a file that is, after a process
//! crash, usually still in the page cache. `pread` copies each byte into a
//! buffer first; that copy measured about 6% of a 5M-record load's CPU
//! (`docs/durability.md`, "Restart"). A shared read-only mapping hands the
//! cached pages over instead.
//!
//! A mapped read that meets a disk error is a SIGBUS, not an error the
//! loader can answer by falling back to an older checkpoint. So a file is
//! mapped only when every one of its pages is already in memory
//! (`mincore`), when no read needs the disk. If pages are reclaimed during
//! the load and the disk then fails, the process dies; the next start finds
//! the file no longer resident and reads it with `pread`, which reports the
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
        // SAFETY: unmaps exactly what `map_resident` mapped, once.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

/// Maps `file` (`len` bytes) if every page of it is in the page cache.
#[cfg(target_os = "linux")]
pub fn map_resident(file: &File, len: u64) -> Option<Mapped> {
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
    let mapped = Mapped {
        ptr: ptr as *const u8,
        len,
    };
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    let mut resident = vec![0u8; len.div_ceil(page.max(1))];
    // SAFETY: `resident` has one byte per page of the mapping, as mincore
    // requires; the mapping is live.
    let r = unsafe { libc::mincore(ptr, len, resident.as_mut_ptr()) };
    (r == 0 && resident.iter().all(|b| b & 1 == 1)).then_some(mapped)
}

#[cfg(not(target_os = "linux"))]
pub fn map_resident(_file: &File, _len: u64) -> Option<Mapped> {
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
        let m = map_resident(&f, bytes.len() as u64).expect("resident");
        assert_eq!(&m[..], &bytes[..]);
        assert!(map_resident(&f, 0).is_none());
    }
}
