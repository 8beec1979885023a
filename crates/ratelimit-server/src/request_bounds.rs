//! The bounds on what one call may carry: descriptors per request, entries per descriptor.

/// The most descriptors one call may carry (`ShouldRateLimit`, `POST
/// /check`): a call with more is refused (`INVALID_ARGUMENT`, 400), so
/// the work and the answer of one call stay bounded.
pub const MAX_DESCRIPTORS: usize = 64;

/// The most entries one descriptor may have, in a call and in a
/// `[[limit]]`'s `descriptors` (refused at load past it).
pub const MAX_ENTRIES: usize = 16;

/// Why a call of `descriptors` (each given by its number of entries) is
/// refused, if it is: none, more than [`MAX_DESCRIPTORS`], or a
/// descriptor with no entries or more than [`MAX_ENTRIES`].
pub(crate) fn refused(descriptors: impl ExactSizeIterator<Item = usize>) -> Option<String> {
    let n = descriptors.len();
    if n == 0 {
        return Some("no descriptors".into());
    }
    if n > MAX_DESCRIPTORS {
        return Some(format!(
            "{n} descriptors: at most {MAX_DESCRIPTORS} in one call"
        ));
    }
    for (i, entries) in descriptors.enumerate() {
        if entries == 0 {
            return Some(format!("descriptors[{i}]: no entries"));
        }
        if entries > MAX_ENTRIES {
            return Some(format!(
                "descriptors[{i}]: {entries} entries: at most {MAX_ENTRIES} in one descriptor"
            ));
        }
    }
    None
}
