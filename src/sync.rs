//! Locking that survives a panicked holder: the data behind these mutexes stays consistent at
//! every await-free step, so a poisoned lock is taken over rather than propagated as a panic.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking the guard back from a poisoned mutex.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
