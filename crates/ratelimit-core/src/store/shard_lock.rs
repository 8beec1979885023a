//! A shard's lock: one writer at a time, and readers that write no line
//! another core also writes.
//!
//! A shard is held for a few nanoseconds (one probe and one decision, or
//! a bounded sweep step), so a writer spins for it: taking and releasing
//! the writer's word costs one atomic read-modify-write and one plain
//! store, where a parking mutex needs two read-modify-writes. A waiter
//! spins briefly, then yields its core, then sleeps, so a holder that is
//! preempted, or busy growing its shard, is not starved.
//!
//! A check that ends in a denial changes nothing, so it only needs to
//! know that no writer changes the shard while it reads. A reader counts
//! itself in its thread's stripe (one of [`STRIPES`] per shard; a
//! stripe's counts of 16 shards fill 128 bytes that threads of other
//! stripes never write), then reads the writer's word, which stays in
//! every core's cache while no one writes it: a read moves no cache line
//! between cores (threads that share a stripe and run at once on two
//! cores move its line). A writer takes the word, then reads its shard's
//! counts in every stripe and waits until each is zero. Both sides use
//! sequentially consistent operations, so either the reader sees the
//! writer's word and steps back (its caller takes the locked path), or
//! the writer sees the reader's count and waits for it. A reader holds
//! its count for one lookup and one decision, unless it is preempted (as
//! a writer holding the word may be).
//!
//! Each stripe has two counts per shard: its owner's and everyone
//! else's. The first thread to read while a stripe has no owner owns it
//! until it exits; only the owner writes the owner's count, so it gives
//! its count back with a plain store where others need a
//! read-modify-write (one locked instruction a read instead of two).
//! Threads beyond [`STRIPES`] owners share the other counts round-robin.
//!
//! Where no thread reads, the stripes' lines stay in a writer's cache: a
//! writer pays a spin lock's cost and 2 × [`STRIPES`] loads from
//! [`STRIPES`] lines.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Reader stripes per shard: each owned by the first thread to read
/// while it has none, until that thread exits; threads that find every
/// stripe owned share the stripes' other counts round-robin.
pub(super) const STRIPES: usize = 4;

/// A shard's data behind its writer's word (8 bytes, first).
#[repr(C)]
pub(super) struct ShardLock<T> {
    /// Nonzero while a writer holds the shard (a `u64`, so the data that
    /// follows starts where a spin lock's did).
    locked: AtomicU64,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard: a `WriteGuard` while
// `locked` is held and every stripe was seen at zero after it was taken,
// a `ReadGuard` while its stripe counts it and `locked` was seen clear
// after that (see the module's docs); so a `&mut T` never coexists with
// another reference, and `&T` is shared between threads only for `T:
// Sync`. A `ReadGuard` is dropped on the thread that made it (it is not
// `Send`): only that thread writes an owner's count.
#[allow(unsafe_code)]
unsafe impl<T: Send + Sync> Sync for ShardLock<T> {}

/// The readers' counts of every shard of a store: for each group of 16
/// shards, one 128-byte block per stripe, each block the counts of the
/// group's shards. A reader writes only its stripe's block, whatever the
/// shard; a writer reads its shard's counts in each of its group's
/// stripes, lines that stay in its cache while no reader writes them.
pub(super) struct Readers {
    groups: Box<[[Line; STRIPES]]>,
}

/// A stripe's counts of 16 shards: shard `i`'s owner count at `2 * i`
/// and its shared count beside it, on one 64-byte line. 128 bytes:
/// processors that fetch lines in pairs would otherwise move two
/// stripes' lines together.
#[repr(align(128))]
#[derive(Default)]
struct Line([AtomicU32; 32]);

impl Readers {
    /// Counts for `shards` shards.
    pub(super) fn new(shards: usize) -> Self {
        let groups = shards.div_ceil(16).max(1);
        Self {
            groups: (0..groups).map(|_| Default::default()).collect(),
        }
    }

    /// The stripes' lines of `shard`'s group, and the index of its
    /// owner count in each (its shared count is the next).
    #[inline(always)]
    fn group(&self, shard: usize) -> (&[Line; STRIPES], usize) {
        (&self.groups[shard / 16], 2 * (shard % 16))
    }

    /// The count a thread at `slot` (see [`slot`]) keeps for `shard`.
    #[inline(always)]
    fn count(&self, slot: u32, shard: usize) -> &AtomicU32 {
        let (lines, i) = self.group(shard);
        &lines[(slot >> 1) as usize & (STRIPES - 1)].0[i + (slot & 1) as usize]
    }
}

thread_local! {
    /// This thread's slot: its stripe times 2, plus 1 unless it owns the
    /// stripe (`u32::MAX` until its first read).
    static SLOT: Cell<u32> = const { Cell::new(u32::MAX) };
    /// The stripe this thread owns, given back when it exits.
    static OWNED: Owned = const { Owned(Cell::new(u32::MAX)) };
}

/// Which stripes have an owner: bit `s` for stripe `s`.
static OWNERS: AtomicU32 = AtomicU32::new(0);

/// The calling thread's slot.
#[inline(always)]
fn slot() -> u32 {
    let s = SLOT.with(Cell::get);
    if s != u32::MAX {
        return s;
    }
    new_slot()
}

/// A slot for a thread's first read: a stripe to own if one has no
/// owner, else a shared count, stripes taken round-robin.
#[cold]
fn new_slot() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let slot = match claim(&OWNERS) {
        // The thread gives it back on exit; where its thread-locals are
        // already gone, it shares instead.
        Some(s) if OWNED.try_with(|o| o.0.set(s)).is_ok() => s << 1,
        taken => {
            if let Some(s) = taken {
                give_back(&OWNERS, s);
            }
            shared(NEXT.fetch_add(1, Ordering::Relaxed))
        }
    };
    SLOT.with(|c| c.set(slot));
    slot
}

/// The slot of a shared count in the `n`-th shared thread's stripe.
fn shared(n: u32) -> u32 {
    (n % STRIPES as u32) << 1 | 1
}

/// Takes a stripe that has no owner in `owners`, if one is left.
/// Acquire: the new owner sees the counts its stripe's previous owner
/// left.
fn claim(owners: &AtomicU32) -> Option<u32> {
    let all = (1u32 << STRIPES) - 1;
    let mut taken = owners.load(Ordering::Relaxed);
    loop {
        let free = !taken & all;
        if free == 0 {
            return None;
        }
        let s = free.trailing_zeros();
        match owners.compare_exchange_weak(
            taken,
            taken | 1 << s,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Some(s),
            Err(now) => taken = now,
        }
    }
}

/// Gives stripe `s` back to `owners`, after its owner's last store to
/// its counts (release).
fn give_back(owners: &AtomicU32, s: u32) {
    owners.fetch_and(!(1 << s), Ordering::Release);
}

/// The stripe a thread owns; on the thread's exit its later reads (from
/// other thread-locals' destructors) use a shared count, and the stripe
/// is free for another thread.
struct Owned(Cell<u32>);

impl Drop for Owned {
    fn drop(&mut self) {
        let s = self.0.get();
        if s != u32::MAX {
            SLOT.with(|c| c.set(shared(s)));
            give_back(&OWNERS, s);
        }
    }
}

/// Exclusive access to a shard's data.
pub(super) struct WriteGuard<'a, T> {
    lock: &'a ShardLock<T>,
}

/// Shared access to a shard's data, for a check that writes nothing.
pub(super) struct ReadGuard<'a, T> {
    data: &'a T,
    count: &'a AtomicU32,
    /// Whether `count` is this thread's own (see the module's docs).
    owned: bool,
    /// Not `Send`: an owner's count is written by its thread alone, so the
    /// guard must be given back there.
    _here: PhantomData<*const ()>,
}

impl<T> ShardLock<T> {
    pub(super) fn new(data: T) -> Self {
        Self {
            locked: AtomicU64::new(0),
            data: UnsafeCell::new(data),
        }
    }

    /// The data, owned.
    #[cfg(test)]
    pub(super) fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Takes the shard for writing: returns the guard and whether another
    /// thread held it or read it.
    #[inline]
    pub(super) fn write<'a>(
        &'a self,
        readers: &Readers,
        shard: usize,
    ) -> (WriteGuard<'a, T>, bool) {
        let mut contended = false;
        // Strong: a spurious failure would count as contention (and move
        // a key to the hot slot for nothing).
        if self
            .locked
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            self.wait_for_writer();
            contended = true;
        }
        let (lines, i) = readers.group(shard);
        let reading = lines.iter().fold(0, |n, line| {
            n | line.0[i].load(Ordering::SeqCst) | line.0[i + 1].load(Ordering::SeqCst)
        });
        if reading != 0 {
            wait_for_group(lines, i);
            contended = true;
        }
        (WriteGuard { lock: self }, contended)
    }

    #[cold]
    #[inline(never)]
    fn wait_for_writer(&self) {
        let mut waited = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) != 0 {
                back_off(&mut waited);
            }
            if self
                .locked
                .compare_exchange_weak(0, 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Reads the shard if no writer holds it, counted in the calling
    /// thread's stripe of `readers`; `None` when a writer does (the
    /// caller then takes the write path).
    #[inline]
    pub(super) fn read<'a>(
        &'a self,
        readers: &'a Readers,
        shard: usize,
    ) -> Option<ReadGuard<'a, T>> {
        let slot = slot();
        let count = readers.count(slot, shard);
        let owned = slot & 1 == 0;
        if owned {
            // Only this thread writes its own count. (A count of u32::MAX
            // readers at once of one shard in one thread cannot be held.)
            let n = count.load(Ordering::Relaxed);
            if n == u32::MAX {
                return None;
            }
            count.store(n + 1, Ordering::SeqCst);
        } else {
            count.fetch_add(1, Ordering::SeqCst);
        }
        if self.locked.load(Ordering::SeqCst) != 0 {
            back_out(count, owned);
            return None;
        }
        // SAFETY: this thread is counted in a stripe, and no writer held
        // the word after that: a writer taking it from now on waits until
        // the count this guard gives back on drop (see the module's docs).
        #[allow(unsafe_code)]
        let data = unsafe { &*self.data.get() };
        Some(ReadGuard {
            data,
            count,
            owned,
            _here: PhantomData,
        })
    }
}

/// Gives back the count of a reader that found a writer (out of line: the
/// read path stays short enough to be inlined whole).
#[cold]
#[inline(never)]
fn back_out(count: &AtomicU32, owned: bool) {
    leave(count, owned);
}

/// Gives back a reader's count: a plain store where the thread owns it.
#[inline(always)]
fn leave(count: &AtomicU32, owned: bool) {
    if owned {
        count.store(count.load(Ordering::Relaxed) - 1, Ordering::Release);
    } else {
        count.fetch_sub(1, Ordering::Release);
    }
}

/// Waits until a shard's readers in every stripe are gone: its counts at
/// `i` and `i + 1` of each stripe's line.
#[cold]
#[inline(never)]
fn wait_for_group(lines: &[Line; STRIPES], i: usize) {
    for line in lines {
        wait_for_readers(&line.0[i]);
        wait_for_readers(&line.0[i + 1]);
    }
}

/// Waits until a stripe's readers are gone (they hold it for one lookup
/// and one decision, unless preempted).
fn wait_for_readers(count: &AtomicU32) {
    let mut waited = 0u32;
    while count.load(Ordering::SeqCst) != 0 {
        back_off(&mut waited);
    }
}

/// Rounds a waiter spins before it yields its core: enough for a holder
/// running on another core, short enough that a holder preempted on this
/// core gets it back soon. With more threads
/// than cores, a longer spin mostly waits on a preempted holder: see
/// BENCHMARKS.md, "Keyed check", the hot key admitted by 4 and 8 threads.
const SPINS: u32 = 4;

/// Yields of its core a waiter makes after spinning, before it sleeps.
/// Few: a holder preempted when its time slice ran out is not chosen to
/// run again until the threads that replaced it have had theirs (an
/// earliest-eligible-deadline scheduler, as Linux's is), however often
/// they yield; sleeping lets it run at once.
const YIELDS: u32 = 2;

/// One round of waiting: a spin, then a yield of the core, then a short
/// sleep, so that a holder that is preempted, or busy growing its shard,
/// is not starved.
#[inline]
fn back_off(waited: &mut u32) {
    if *waited < SPINS {
        std::hint::spin_loop();
    } else if *waited < SPINS + YIELDS {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(10));
    }
    *waited = waited.saturating_add(1);
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the shard alone (see `ShardLock`).
        #[allow(unsafe_code)]
        unsafe {
            &*self.lock.data.get()
        }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the shard alone (see `ShardLock`).
        #[allow(unsafe_code)]
        unsafe {
            &mut *self.lock.data.get()
        }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(0, Ordering::Release);
    }
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        self.data
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        leave(self.count, self.owned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_writer_keeps_readers_out_and_readers_hold_writers_back() {
        let readers = Readers::new(20);
        let lock = ShardLock::new(5u64);
        {
            let (mut w, contended) = lock.write(&readers, 17);
            assert!(!contended);
            *w += 1;
            assert!(lock.read(&readers, 17).is_none());
        }
        let r = lock.read(&readers, 17).unwrap();
        assert_eq!(*r, 6);
        // A second reader, and the stripe counts both.
        let r2 = lock.read(&readers, 17).unwrap();
        assert_eq!(readers.count(slot(), 17).load(Ordering::Relaxed), 2);
        // Given back in either order.
        drop(r);
        assert_eq!(readers.count(slot(), 17).load(Ordering::Relaxed), 1);
        drop(r2);
        assert_eq!(readers.count(slot(), 17).load(Ordering::Relaxed), 0);
        // Another shard's count is another counter, and a stripe's owner
        // count another than its shared one.
        assert!(!std::ptr::eq(readers.count(0, 1), readers.count(0, 17)));
        assert!(!std::ptr::eq(readers.count(0, 1), readers.count(1, 1)));
        assert_eq!(readers.groups.len(), 2);
    }

    /// Stripes are owned one thread each, and free again once given back.
    #[test]
    fn each_stripe_has_one_owner_at_a_time() {
        let owners = AtomicU32::new(0);
        let mut got: Vec<u32> = (0..STRIPES).map(|_| claim(&owners).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..STRIPES as u32).collect::<Vec<_>>());
        assert_eq!(claim(&owners), None);
        give_back(&owners, 2);
        assert_eq!(claim(&owners), Some(2));
        assert_eq!(claim(&owners), None);
        // A shared slot is odd, an owner's even, of the same stripe.
        assert_eq!(shared(6) >> 1, 2);
        assert_eq!(shared(6) & 1, 1);
    }

    /// Writers keep a pair equal, readers check it: a reader never sees a
    /// write half done, and no write is lost.
    #[test]
    fn readers_never_see_a_write_in_progress() {
        const THREADS: u64 = 6;
        const ROUNDS: u64 = 20_000;
        let readers = Readers::new(1);
        let lock = ShardLock::new((0u64, 0u64));
        let seen = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (lock, readers, seen) = (&lock, &readers, &seen);
                s.spawn(move || {
                    for i in 0..ROUNDS {
                        if (i + t) % 3 == 0 {
                            let mut w = lock.write(readers, 0).0;
                            w.0 += 1;
                            std::hint::black_box(&mut *w);
                            w.1 += 1;
                        } else if let Some(r) = lock.read(readers, 0) {
                            assert_eq!(r.0, r.1);
                            seen.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let writes = (0..THREADS)
            .map(|t| (0..ROUNDS).filter(|i| (i + t) % 3 == 0).count() as u64)
            .sum::<u64>();
        let (a, b) = lock.into_inner();
        assert_eq!((a, b), (writes, writes));
        assert!(seen.into_inner() > 0);
    }
}
