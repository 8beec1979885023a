//! Where a shard's table lies, so that a check can ask for its key's
//! lines before it takes the shard's lock.
//!
//! A check reads the table's control bytes, then the key's bucket, whose
//! address depends on them, and an admission writes the key's state
//! there. Both lie where the key's hash points, in the group its probe
//! starts at (most keys sit there, within a few buckets of its start), so
//! a check that knows the table's address asks for both lines before it
//! takes the lock:
//! - among many keys the two memory misses overlap each other and the
//!   lock, instead of following one another under it;
//! - a check that is likely to write the key's state asks for its bucket
//!   with the intent to write (`prefetchw`), so that a line another core
//!   holds starts to move while the lock is still free, and less of the
//!   move happens under it. Under contention, and above all with more
//!   threads than cores, a shorter hold is fewer checks that find the
//!   lock taken, by a holder that may have been preempted.
//!
//! Only the asking for a write is a guess. A denial by GCRA reads its
//! key's state and writes nothing (other algorithms may move a window),
//! and a line asked for with the intent to write is taken from every
//! other core that holds it, which then misses on it at its next check
//! of the key. Whether a check will be admitted is not known before its
//! state is read, so each thread guesses from its own latest check
//! (see `guess`): a thread-local flag, written by that thread alone.
//! The key whose state is in its shard's hot slot (see `Shard`) is only
//! read in its bucket, and is asked for to read. A wrong guess moves a
//! line for nothing, never changes a decision.
//!
//! A prefetch is only a hint: it reads nothing and cannot fault, so a
//! stale address (a table reallocated since) costs a line moved for
//! nothing, never a wrong decision.
//!
//! The addresses follow hashbrown's layout (buckets stored downwards from
//! the control bytes, a probe starting at `hash & mask` and reading a
//! group of 16 control bytes); the tests check that layout, which only
//! speed depends on. Other targets than x86_64 get no hints.

use super::guess;
use hashbrown::HashTable;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Tables smaller than this are left alone: with a few keys per shard
/// their lines stay in every core's cache, and a hint would only cost
/// instructions.
const MIN_BYTES: usize = 8 * 1024;

/// The buckets from the probe's start whose lines are asked for: the
/// first and the fourth (a key past its start is most often within them).
const AHEAD: usize = 4;

/// The control bytes a probe reads at once (hashbrown's SSE2 group).
const GROUP: usize = 16;

/// The end of a shard's buckets (where its control bytes start), its
/// bucket mask, and the hash of the key last moved to its hot slot;
/// written under the shard's lock, read without it. `end` is null while
/// the table is small.
#[derive(Debug)]
pub(super) struct Place {
    end: AtomicPtr<u8>,
    mask: AtomicUsize,
    hot: AtomicU64,
    /// Whether the processor has `prefetchw` (fixed when the shard is
    /// made).
    write: bool,
}

impl Default for Place {
    fn default() -> Self {
        Self {
            end: AtomicPtr::default(),
            mask: AtomicUsize::default(),
            hot: AtomicU64::default(),
            write: has_prefetchw(),
        }
    }
}

impl Place {
    /// Records where `table` lies now (under the shard's lock, after a
    /// change that may have reallocated it).
    pub(super) fn update<T>(&self, table: &HashTable<T>) {
        let buckets = table.num_buckets();
        let mask = buckets.wrapping_sub(1);
        let large =
            cfg!(target_arch = "x86_64") && buckets.saturating_mul(size_of::<T>()) >= MIN_BYTES;
        let known = !self.end.load(Ordering::Relaxed).is_null();
        // A table is reallocated only to another size.
        if self.mask.load(Ordering::Relaxed) == mask && known == large {
            return;
        }
        let end = match large {
            true => end_of(table),
            false => std::ptr::null_mut(),
        };
        self.mask.store(mask, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
    }

    /// Records that the state of the key hashed `hash` moved to the hot
    /// slot (under the lock). It is not forgotten when the state moves
    /// back: that key's bucket is then asked for to read, a line's move.
    #[inline]
    pub(super) fn hot(&self, hash: u64) {
        self.hot.store(hash, Ordering::Relaxed);
    }

    /// Asks for the lines a lookup of `hash` reads, in a table of `T`.
    #[inline(always)]
    pub(super) fn prefetch<T>(&self, hash: u64) {
        let end = self.end.load(Ordering::Relaxed);
        if end.is_null() {
            return;
        }
        // hashbrown's probe starts at the hash's low bits.
        let start = hash as usize & self.mask.load(Ordering::Relaxed);
        // Its group of control bytes may cross into the next line.
        hint(end.wrapping_add(start));
        hint(end.wrapping_add(start + GROUP - 1));
        let size = size_of::<T>();
        let bucket = end.wrapping_sub((start + 1) * size);
        // An entry whose size does not divide 16 (the buckets' alignment)
        // may cross a line: its last byte is asked for too.
        let write =
            self.write && guess::likely_admitted() && self.hot.load(Ordering::Relaxed) != hash;
        hint_for(write, bucket);
        if 16 % size != 0 {
            hint_for(write, bucket.wrapping_add(size - 1));
        }
        hint(bucket.wrapping_sub((AHEAD - 1) * size));
    }
}

/// The end of `table`'s buckets, found from any bucket that holds an
/// entry (null when none does).
fn end_of<T>(table: &HashTable<T>) -> *mut u8 {
    let Some(index) = table.iter_buckets().next() else {
        return std::ptr::null_mut();
    };
    match table.get_bucket(index) {
        Some(entry) => {
            let at = std::ptr::from_ref(entry).cast::<u8>().cast_mut();
            at.wrapping_add((index + 1) * size_of::<T>())
        }
        None => std::ptr::null_mut(),
    }
}

/// Whether this processor has `prefetchw` as CPUID reports it (AMD's
/// since the K8's successors, Intel's since Broadwell; where it does not,
/// the bucket is asked for to read). Asked once a process, as under a
/// hypervisor each CPUID is a trap to it.
fn has_prefetchw() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(cpuid_prefetchw)
}

/// CPUID 8000_0001h, ECX bit 8.
fn cpuid_prefetchw() -> bool {
    // (In an SGX enclave CPUID faults: no `prefetchw` there.)
    #[cfg(all(target_arch = "x86_64", not(target_env = "sgx")))]
    {
        // `__cpuid` is safe in newer releases, unsafe in 1.85 (this
        // crate's oldest).
        #[allow(unused_unsafe, unsafe_code)]
        // SAFETY: CPUID exists on every x86_64 processor outside an SGX
        // enclave, and leaf 8000_0001h on every one (it holds the
        // long-mode bit).
        let ecx = unsafe { std::arch::x86_64::__cpuid(0x8000_0001) }.ecx;
        ecx & (1 << 8) != 0
    }
    #[cfg(not(all(target_arch = "x86_64", not(target_env = "sgx"))))]
    false
}

/// A hint to bring the line holding `at` into the cache, for writing if
/// `write`.
#[inline(always)]
fn hint_for(write: bool, at: *const u8) {
    if write {
        hint_write(at);
    } else {
        hint(at);
    }
}

/// A hint to bring the line holding `at` into the cache for writing
/// (only called where the processor has `prefetchw`).
#[inline(always)]
fn hint_write(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` changes no memory and cannot fault, whatever
    // the address; it is only called where CPUID reports it. It is
    // declared `readonly` (as reading memory), so that the compiler keeps
    // it among the loads around it.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::asm!(
            "prefetchw [{0}]",
            in(reg) at,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// A hint to bring the line holding `at` into the cache.
#[inline(always)]
fn hint(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads no memory and cannot fault, whatever the
    // address; SSE, which it needs, is part of every x86_64 target.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// The layout the hints assume: bucket `i` ends `i * size` bytes below
    /// the end, and a key is found within a few buckets of where its
    /// probe starts.
    #[test]
    fn the_hints_name_the_lines_a_lookup_reads() {
        let hasher = std::hash::RandomState::new();
        let mut table: HashTable<(u64, u64)> = HashTable::new();
        let n = 100_000u64;
        for k in 0..n {
            table.insert_unique(hasher.hash_one(k), (k, 0), |(k, _)| hasher.hash_one(k));
        }
        let place = Place::default();
        place.update(&table);
        let end = place.end.load(Ordering::Relaxed);
        // Other targets get no hints.
        assert_eq!(end.is_null(), !cfg!(target_arch = "x86_64"));
        if end.is_null() {
            return;
        }
        let mask = place.mask.load(Ordering::Relaxed);
        assert_eq!(mask + 1, table.num_buckets());
        let mut near = 0;
        for k in 0..n {
            let hash = hasher.hash_one(k);
            let index = table.find_bucket_index(hash, |(x, _)| *x == k).unwrap();
            let entry = table.get_bucket(index).unwrap();
            let at = std::ptr::from_ref(entry).cast::<u8>();
            assert_eq!(at, end.wrapping_sub((index + 1) * 16).cast_const());
            let from_start = index.wrapping_sub(hash as usize & mask) & mask;
            near += u64::from(from_start < AHEAD);
        }
        // Most keys lie within the buckets asked for.
        assert!(near * 10 > n * 7, "{near} of {n}");
        // Both kinds of hint run, on addresses in and out of the table.
        for write in [false, has_prefetchw()] {
            let place = Place {
                write,
                ..place_of(&table)
            };
            for hash in [0, 1, u64::MAX, hasher.hash_one(7u64)] {
                place.prefetch::<(u64, u64)>(hash);
                place.hot(hash);
                place.prefetch::<(u64, u64)>(hash);
                // Entries that may cross a line.
                place.prefetch::<(u64, u64, u64)>(hash);
            }
        }
    }

    fn place_of<T>(table: &HashTable<T>) -> Place {
        let place = Place::default();
        place.update(table);
        place
    }

    #[test]
    fn a_small_table_is_left_to_the_caches() {
        let mut table: HashTable<(u64, u64)> = HashTable::new();
        table.insert_unique(1, (1, 0), |_| 1);
        let place = Place::default();
        place.update(&table);
        assert!(place.end.load(Ordering::Relaxed).is_null());
        place.prefetch::<(u64, u64)>(1);
    }
}
