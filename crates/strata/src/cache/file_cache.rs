// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`FileCache`]: files of one kind (tables, blob files), opened on demand by number and kept
//! open up to a bound, so that a database holds a bounded number of descriptors.
//!
//! Ownership: the cache hands out `Arc`s. A file evicted from the cache (by the bound or by
//! [`FileCache::evict`]) stays open while some reader still holds its `Arc`; it is closed when
//! the last holder drops it.
//!
//! Locking: concurrent lookups of a number that is not open yet wait for one of them to open it
//! (quick_cache's placeholder guard), so a file is never opened twice at once. A failed open
//! leaves nothing behind: the next lookup tries again.
//!
//! Pinning ([`FileCache::pin`]): a read-only handle beside a writer in another process opens
//! every file of its state at once and holds it (the writer may delete it at any time). The
//! holder keeps the strong `Arc`; the cache keeps a weak one, which a miss tries before
//! opening, so a pinned file evicted from the cache is found again, never reopened from a
//! name that may be gone. The weak map has its own mutex, taken only on a miss and by `pin`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use quick_cache::sync::DefaultLifecycle;
use quick_cache::{DefaultHashBuilder, Lifecycle, UnitWeighter};

use crate::error::Result;

/// How a [`FileCache`] opens file number `N` on a miss.
///
/// The cache is generic over its opener, so a lookup costs what a direct call would: no
/// dynamic dispatch, and the opener runs only on a miss.
pub(crate) trait FileOpener {
    /// What an opened file is.
    type File;
    /// What a lookup knows about the file that opening it needs (tables: their size in the
    /// MANIFEST; blob files: nothing).
    type Hint;

    /// Opens file `number`.
    fn open(&self, number: u64, hint: Self::Hint) -> Result<Self::File>;
}

/// A file a [`FileCache`] holds, which may be pinned: held by a user for longer than a
/// lookup (a table a version's file holds, `TablePin`), and then never evicted, so that a
/// lookup of its number finds the same open file and the cache's bound counts it.
pub(crate) trait CachedFile {
    /// True while the file is pinned.
    fn is_pinned(&self) -> bool {
        false
    }
}

impl CachedFile for (u64, u32) {}

/// quick_cache's default lifecycle (evicted files dropped after the shard's lock is released),
/// and pinned files kept.
struct KeepPinned<F>(DefaultLifecycle<u64, Arc<F>>);

impl<F> Clone for KeepPinned<F> {
    fn clone(&self) -> Self {
        KeepPinned(self.0.clone())
    }
}

impl<F: CachedFile> Lifecycle<u64, Arc<F>> for KeepPinned<F> {
    type RequestState = <DefaultLifecycle<u64, Arc<F>> as Lifecycle<u64, Arc<F>>>::RequestState;

    #[inline]
    fn begin_request(&self) -> Self::RequestState {
        self.0.begin_request()
    }

    #[inline]
    fn on_evict(&self, state: &mut Self::RequestState, key: u64, file: Arc<F>) {
        self.0.on_evict(state, key, file);
    }

    #[inline]
    fn is_pinned(&self, _number: &u64, file: &Arc<F>) -> bool {
        file.is_pinned()
    }
}

/// Opened files keyed by file number, at most about `capacity` of them (pinned ones included:
/// a shard whose every file is pinned keeps one more rather than evict one).
pub(crate) struct FileCache<O: FileOpener> {
    opener: O,
    files: quick_cache::sync::Cache<
        u64,
        Arc<O::File>,
        UnitWeighter,
        DefaultHashBuilder,
        KeepPinned<O::File>,
    >,
    /// Calls of the opener (a relaxed counter, bumped only on a miss). quick_cache's own
    /// miss count is not used: a lookup that goes on to open counts as two misses there.
    opens: AtomicU64,
    /// Files some holder pinned, by number (weak: the holder owns them). Entries whose file
    /// is gone are dropped at the next `pin`.
    pinned: Mutex<HashMap<u64, Weak<O::File>>>,
}

impl<O: FileOpener> std::fmt::Debug for FileCache<O>
where
    O::File: CachedFile,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("open", &self.files.len())
            .finish_non_exhaustive()
    }
}

impl<O: FileOpener> FileCache<O>
where
    O::File: CachedFile,
{
    /// A cache opening files with `opener` and keeping up to `capacity` of them open (at
    /// least 1).
    pub(crate) fn with_opener(opener: O, capacity: usize) -> Self {
        FileCache {
            opener,
            files: quick_cache::sync::Cache::with(
                capacity.max(1),
                capacity.max(1) as u64,
                UnitWeighter,
                DefaultHashBuilder::default(),
                KeepPinned(DefaultLifecycle::default()),
            ),
            opens: AtomicU64::new(0),
            pinned: Mutex::new(HashMap::new()),
        }
    }

    /// The opener, for what its user needs of the files' context (their directory, say).
    pub(crate) fn opener(&self) -> &O {
        &self.opener
    }

    /// The open file `number`, opened with `hint` if it is not open.
    ///
    /// # Errors
    /// Whatever the opener returns; the error is not cached.
    #[inline]
    pub(crate) fn get(&self, number: u64, hint: O::Hint) -> Result<Arc<O::File>> {
        self.files.get_or_insert_with(&number, || {
            if let Some(file) = self.pinned_file(number) {
                return Ok(file);
            }
            self.opens.fetch_add(1, Ordering::Relaxed);
            self.opener.open(number, hint).map(Arc::new)
        })
    }

    /// The open file `number`, opened with `hint` if needed, and pinned: while the caller
    /// holds the returned `Arc`, every lookup of `number` returns this same open file, even
    /// after the cache evicted it (it is never opened again by name).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub(crate) fn pin(&self, number: u64, hint: O::Hint) -> Result<Arc<O::File>> {
        let file = self.get(number, hint)?;
        let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        pinned.retain(|_, weak| weak.strong_count() > 0);
        pinned.insert(number, Arc::downgrade(&file));
        Ok(file)
    }

    /// The pinned file `number`, if a holder still holds it.
    fn pinned_file(&self, number: u64) -> Option<Arc<O::File>> {
        let pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        pinned.get(&number).and_then(Weak::upgrade)
    }

    /// Puts `file`, open as `number`, in the cache (again, if it was evicted since it was
    /// looked up): for a file just pinned, which a lookup may have inserted and evicted at
    /// once, before it was pinned, when every other file was hot or pinned.
    pub(crate) fn keep(&self, number: u64, file: Arc<O::File>) {
        self.files.insert(number, file);
    }

    /// Forgets file `number`; readers holding it keep it.
    pub(crate) fn evict(&self, number: u64) {
        self.files.remove(&number);
    }

    /// The number of files held open by the cache.
    pub(crate) fn open_count(&self) -> usize {
        self.files.len()
    }

    /// Lookups that found their file open, since the cache was made (quick_cache's per-shard
    /// counters). A lookup that waited for another's open of the same file counts as a hit.
    pub(crate) fn hit_count(&self) -> u64 {
        self.files.hits()
    }

    /// Lookups that opened their file (successfully or not), since the cache was made.
    pub(crate) fn miss_count(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::atomic::AtomicUsize;

    /// Opens "files" that are their number and the hint; numbers above 1000 fail.
    #[derive(Default)]
    struct Counting {
        opens: AtomicUsize,
    }

    impl FileOpener for Counting {
        type File = (u64, u32);
        type Hint = u32;

        fn open(&self, number: u64, hint: u32) -> Result<(u64, u32)> {
            self.opens.fetch_add(1, Ordering::Relaxed);
            if number > 1000 {
                return Err(Error::corruption(format!("{number:06}.ldb"), 0, "damaged"));
            }
            Ok((number, hint))
        }
    }

    fn opens(cache: &FileCache<Counting>) -> usize {
        cache.opener().opens.load(Ordering::Relaxed)
    }

    #[test]
    fn opens_on_a_miss_and_shares_the_file_on_a_hit() {
        let cache = FileCache::with_opener(Counting::default(), 10);
        let first = cache.get(7, 1).unwrap();
        assert_eq!(*first, (7, 1));
        assert_eq!((opens(&cache), cache.open_count()), (1, 1));
        // A hit neither opens again nor looks at the hint.
        let again = cache.get(7, 2).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!((opens(&cache), cache.open_count()), (1, 1));
        assert_eq!((cache.hit_count(), cache.miss_count()), (1, 1));
    }

    #[test]
    fn a_failed_open_is_not_cached() {
        let cache = FileCache::with_opener(Counting::default(), 10);
        assert!(cache.get(1001, 0).unwrap_err().is_corruption());
        assert!(cache.get(1001, 0).unwrap_err().is_corruption());
        assert_eq!((opens(&cache), cache.open_count()), (2, 0));
        assert_eq!((cache.hit_count(), cache.miss_count()), (0, 2));
    }

    #[test]
    fn evict_forgets_one_file_and_its_holders_keep_it() {
        let cache = FileCache::with_opener(Counting::default(), 10);
        let held = cache.get(3, 0).unwrap();
        cache.get(4, 0).unwrap();
        cache.evict(3);
        assert_eq!(cache.open_count(), 1);
        assert_eq!(*held, (3, 0));
        let reopened = cache.get(3, 5).unwrap();
        assert!(!Arc::ptr_eq(&held, &reopened));
        assert_eq!(*reopened, (3, 5));
        assert_eq!(opens(&cache), 3);
        // File 4 was left alone.
        cache.get(4, 0).unwrap();
        assert_eq!(opens(&cache), 3);
    }

    #[test]
    fn holds_at_most_its_capacity() {
        let cache = FileCache::with_opener(Counting::default(), 8);
        for n in 1..=100 {
            cache.get(n, 0).unwrap();
            assert!(cache.open_count() <= 8, "{} open", cache.open_count());
        }
        assert_eq!(opens(&cache), 100);
        // Some of the early files were closed, so asking for all again opens some anew.
        for n in 1..=100 {
            cache.get(n, 0).unwrap();
        }
        assert!(opens(&cache) > 100);
    }

    #[test]
    fn a_pinned_file_is_never_opened_again_while_held() {
        let cache = FileCache::with_opener(Counting::default(), 2);
        let held = cache.pin(1, 9).unwrap();
        // Evicted by the bound, and by hand: a lookup finds the pinned file, without opening.
        for n in 2..=10 {
            cache.get(n, 0).unwrap();
        }
        cache.evict(1);
        let again = cache.get(1, 0).unwrap();
        assert!(Arc::ptr_eq(&held, &again));
        assert_eq!(opens(&cache), 10);
        // Once its holders let go, the number is opened anew.
        drop((held, again));
        cache.evict(1);
        assert_eq!(*cache.get(1, 5).unwrap(), (1, 5));
        assert_eq!(opens(&cache), 11);
    }

    #[test]
    fn capacity_zero_still_holds_one_file() {
        let cache = FileCache::with_opener(Counting::default(), 0);
        cache.get(1, 0).unwrap();
        assert_eq!(cache.open_count(), 1);
    }
}
