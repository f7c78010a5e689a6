//! What one repair has read from the two maps that are slow to walk, the corpus's word pairs
//! and the usage list (FSTs: one to three thousand instructions a look-up), kept for the
//! questions it asks again: its readings and its second pass ask of the same pairs and strings,
//! over half of their look-ups a second time or more (dl19's typo queries: 8,224 pair walks of
//! 3,526 pairs, 5,234 usage walks of 1,322 strings).
//!
//! Kept per thread for the span of one repair ([`remembering`]), as the questions come from
//! deep in the decoder and the maps are shared by every thread; outside that span nothing is
//! kept and every question walks its map.

use std::cell::RefCell;
use std::collections::HashMap;

use foldhash::fast::FixedState;

/// The answers of one map, with the map they came from (its address), so that one map's
/// answers never stand for another's.
struct Kept<K: ?Sized, V> {
    map: usize,
    answers: HashMap<Box<K>, V, FixedState>,
}

impl<K: ?Sized + Eq + std::hash::Hash, V: Copy> Kept<K, V> {
    fn new() -> Self {
        Kept {
            map: 0,
            answers: HashMap::default(),
        }
    }

    /// The answer for `key` from the map at `map`, walking it (`walk`) the first time.
    fn answer(&mut self, map: usize, key: &K, walk: impl FnOnce() -> V) -> V
    where
        Box<K>: for<'a> From<&'a K>,
    {
        if self.map != map {
            self.map = map;
            self.answers.clear();
        }
        if let Some(&v) = self.answers.get(key) {
            return v;
        }
        let v = walk();
        self.answers.insert(Box::from(key), v);
        v
    }
}

/// The answers kept during one repair.
struct Answers {
    corpus_pairs: Kept<[u8], u64>,
    usage: Kept<str, Option<u64>>,
}

thread_local! {
    static ANSWERS: RefCell<Option<Answers>> = const { RefCell::new(None) };
}

/// Runs `f`, one repair, keeping what it reads from the slow maps until it returns (or unwinds).
pub(crate) fn remembering<R>(f: impl FnOnce() -> R) -> R {
    /// Puts back what was kept before (nothing, unless repairs nest).
    struct Restore(Option<Answers>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            // A thread being torn down has no answers to put back.
            let _ = ANSWERS.try_with(|a| *a.borrow_mut() = outer);
        }
    }
    let fresh = Answers {
        corpus_pairs: Kept::new(),
        usage: Kept::new(),
    };
    let _restore = Restore(ANSWERS.with(|a| a.borrow_mut().replace(fresh)));
    f()
}

/// The corpus count of the pair keyed `key` in the map at `map`: kept within a repair, walked
/// (`walk`) otherwise.
pub(crate) fn corpus_pair(map: usize, key: &[u8], walk: &dyn Fn() -> u64) -> u64 {
    with_answers(|a| a.corpus_pairs.answer(map, key, walk), walk)
}

/// The usage list's figure for `word` in the list at `map`: kept within a repair, walked
/// (`walk`) otherwise.
pub(crate) fn usage(map: usize, word: &str, walk: impl Fn() -> Option<u64>) -> Option<u64> {
    with_answers(|a| a.usage.answer(map, word, &walk), &walk)
}

/// `kept` with this thread's answers during a repair; `walk` outside one (or where the answers
/// are already borrowed, which no caller does).
fn with_answers<V>(kept: impl FnOnce(&mut Answers) -> V, walk: &dyn Fn() -> V) -> V {
    ANSWERS
        .try_with(|a| match a.try_borrow_mut() {
            Ok(mut a) => a.as_mut().map(kept),
            Err(_) => None,
        })
        .ok()
        .flatten()
        .unwrap_or_else(walk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_repair_walks_each_key_of_a_map_once_and_nothing_is_kept_outside_one() {
        let walks = Cell::new(0);
        let walk = || {
            walks.set(walks.get() + 1);
            7
        };
        remembering(|| {
            assert_eq!(corpus_pair(1, b"new york", &walk), 7);
            assert_eq!(corpus_pair(1, b"new york", &walk), 7);
            assert_eq!(walks.get(), 1);
            // Another map's answers are its own.
            assert_eq!(corpus_pair(2, b"new york", &walk), 7);
            assert_eq!(walks.get(), 2);
        });
        corpus_pair(2, b"new york", &walk);
        corpus_pair(2, b"new york", &walk);
        assert_eq!(walks.get(), 4);
    }

    #[test]
    fn what_a_repair_kept_is_gone_after_it_even_when_it_panics() {
        let walks = Cell::new(0);
        let walk = || {
            walks.set(walks.get() + 1);
            Some(3)
        };
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            remembering(|| {
                usage(1, "teh", walk);
                panic!("a repair that fails");
            })
        }));
        assert!(panicked.is_err());
        remembering(|| {
            assert_eq!(usage(1, "teh", walk), Some(3));
        });
        assert_eq!(walks.get(), 2);
    }
}
