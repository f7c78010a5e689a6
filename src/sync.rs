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

/// Read-locks `l`, taking the guard back from a poisoned lock.
pub fn read<T>(l: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    match l.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Write-locks `l`, taking the guard back from a poisoned lock.
pub fn write<T>(l: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    match l.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
