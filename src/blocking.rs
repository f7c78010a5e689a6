//! Blocking work that a drop may set off wherever the last reference goes — often a tokio worker
//! at the end of a request: removing a replaced version's directory, giving freed heap pages back
//! to the OS. On a runtime thread it is handed to the runtime's blocking pool, so no worker
//! stalls on the file system or the allocator; elsewhere it runs at once.

/// Runs `work` on a blocking thread when called from inside a tokio runtime, else here.
pub fn off_runtime(work: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(work);
        }
        Err(_) => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_leaves_runtime_threads_and_runs_in_place_elsewhere() {
        let here = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        off_runtime(move || tx.send(std::thread::current().id()).unwrap());
        assert_eq!(rx.recv().unwrap(), here, "outside a runtime: in place");

        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = rt.block_on(async move {
            off_runtime(move || tx.send(std::thread::current().id()).unwrap());
            std::thread::current().id()
        });
        let ran_on = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the work ran");
        assert_ne!(ran_on, worker, "on a runtime: a blocking thread");
    }
}
