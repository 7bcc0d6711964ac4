//! Locking the host's mutexes. The one helper every module of the host
//! shares; it holds no state and imports nothing of the crate.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex, recovering from poisoning: every durable change is
/// transactional, so state behind a poisoned lock is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
