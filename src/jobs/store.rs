//! Job records and events in SQLite (`<data-dir>/jobs.db`): one row per job holding its record
//! as JSON, one row per event. Every change is a transaction, so a crash loses nothing that was
//! acknowledged, and a restarted server finds every job where it was.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};

use super::record::{JobEvent, JobRecord, JobStatus};

/// A store failure (disk, corrupt file).
#[derive(Debug, thiserror::Error)]
#[error("job store {path}: {message}")]
pub struct StoreError {
    pub path: PathBuf,
    pub message: String,
}

/// A page of jobs, newest first.
#[derive(Debug, Clone)]
pub struct Page {
    pub jobs: Vec<JobRecord>,
    /// Pass as `page_token` for the next page; `None` on the last page.
    pub next_page_token: Option<String>,
}

/// The store. Calls are short and serialised by one connection.
pub struct JobStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    id      TEXT NOT NULL UNIQUE,
    status  TEXT NOT NULL,
    record  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
CREATE TABLE IF NOT EXISTS events (
    job     TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    at      TEXT NOT NULL,
    kind    TEXT NOT NULL,
    data    TEXT NOT NULL,
    PRIMARY KEY (job, seq)
);
";

impl JobStore {
    /// Opens (or creates) the store at `path`.
    pub fn open(path: &Path) -> Result<JobStore, StoreError> {
        let err = |e: rusqlite::Error| StoreError {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        }
        let conn = Connection::open(path).map_err(err)?;
        // WAL: readers never wait for the writer; FULL: a committed change survives a power cut.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(JobStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    fn err(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        crate::sync::lock(&self.conn)
    }

    /// Inserts a new job with its first event.
    pub fn insert(&self, job: &JobRecord, event: &JobEvent) -> Result<(), StoreError> {
        let record = serde_json::to_string(job).map_err(|e| self.err(e))?;
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO jobs (id, status, record) VALUES (?1, ?2, ?3)",
            params![job.id, job.status.as_str(), record],
        )
        .map_err(|e| self.err(e))?;
        insert_event(&tx, event).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Saves a job's record, and an event with it when one is given, in one transaction.
    pub fn save(&self, job: &JobRecord, event: Option<&JobEvent>) -> Result<(), StoreError> {
        let record = serde_json::to_string(job).map_err(|e| self.err(e))?;
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        let n = tx
            .execute(
                "UPDATE jobs SET status = ?2, record = ?3 WHERE id = ?1",
                params![job.id, job.status.as_str(), record],
            )
            .map_err(|e| self.err(e))?;
        if n != 1 {
            return Err(self.err(format!("no job {} to update", job.id)));
        }
        if let Some(ev) = event {
            insert_event(&tx, ev).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// One job.
    pub fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let conn = self.conn();
        let text: Option<String> = conn
            .query_row("SELECT record FROM jobs WHERE id = ?1", params![id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.err(e))?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.err(format!("job {id}: {e}"))))
            .transpose()
    }

    /// Jobs newest first, `limit` per page, optionally of one status. `page_token` is the
    /// `next_page_token` of the previous page.
    pub fn list(
        &self,
        limit: usize,
        page_token: Option<&str>,
        status: Option<JobStatus>,
    ) -> Result<Page, StoreError> {
        let before: i64 = match page_token {
            Some(t) => t
                .parse()
                .map_err(|_| self.err(format!("invalid page_token {t:?}")))?,
            None => i64::MAX,
        };
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT seq, record FROM jobs WHERE seq < ?1 AND (?2 IS NULL OR status = ?2)
                 ORDER BY seq DESC LIMIT ?3",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![before, status.map(JobStatus::as_str), (limit + 1) as i64],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
            )
            .map_err(|e| self.err(e))?;
        let mut jobs = Vec::new();
        let mut seqs = Vec::new();
        for row in rows {
            let (seq, text) = row.map_err(|e| self.err(e))?;
            seqs.push(seq);
            jobs.push(serde_json::from_str(&text).map_err(|e| self.err(e))?);
        }
        let next_page_token = if jobs.len() > limit {
            jobs.truncate(limit);
            seqs.get(limit - 1).map(|s| s.to_string())
        } else {
            None
        };
        Ok(Page {
            jobs,
            next_page_token,
        })
    }

    /// Jobs with one of `statuses`, oldest first (recovery and the queue).
    pub fn with_status(&self, statuses: &[JobStatus]) -> Result<Vec<JobRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT status, record FROM jobs ORDER BY seq ASC")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (status, text) = row.map_err(|e| self.err(e))?;
            if statuses.iter().any(|s| s.as_str() == status) {
                out.push(serde_json::from_str(&text).map_err(|e| self.err(e))?);
            }
        }
        Ok(out)
    }

    /// A job's events with `seq > after`, in order.
    pub fn events(&self, job: &str, after: u64) -> Result<Vec<JobEvent>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT seq, at, kind, data FROM events WHERE job = ?1 AND seq > ?2 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![job, after as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, at, kind, data) = row.map_err(|e| self.err(e))?;
            out.push(JobEvent {
                job: job.to_string(),
                seq: seq as u64,
                at,
                kind,
                data: serde_json::from_str(&data).map_err(|e| self.err(e))?,
            });
        }
        Ok(out)
    }

    /// The highest event number of a job (0 when it has none).
    pub fn last_event_seq(&self, job: &str) -> Result<u64, StoreError> {
        let conn = self.conn();
        let n: Option<i64> = conn
            .query_row(
                "SELECT MAX(seq) FROM events WHERE job = ?1",
                params![job],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(n.unwrap_or(0) as u64)
    }

    /// Jobs per status.
    pub fn counts(&self) -> Result<Vec<(JobStatus, u64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT status, COUNT(*) FROM jobs GROUP BY status")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (s, n) = row.map_err(|e| self.err(e))?;
            if let Ok(st) = s.parse() {
                out.push((st, n as u64));
            }
        }
        Ok(out)
    }
}

fn insert_event(tx: &rusqlite::Transaction<'_>, ev: &JobEvent) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT INTO events (job, seq, at, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![ev.job, ev.seq as i64, ev.at, ev.kind, ev.data.to_string()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::record::*;
    use crate::jobs::spec::JobSpec;

    fn job(id: &str, status: JobStatus) -> JobRecord {
        JobRecord {
            id: id.into(),
            status,
            stage: None,
            runner: "local".into(),
            runner_ref: None,
            attempts: 0,
            spec: serde_json::from_value(serde_json::json!({
                "name": "n", "base_encoder": "b", "queries": "/q", "variants": ["/v"],
            }))
            .unwrap(),
            base_path: "/b".into(),
            progress: Progress::default(),
            times: Timestamps {
                created_at: "2026-11-22T00:00:00Z".into(),
                ..Default::default()
            },
            overhead: Overhead::default(),
            encoder: None,
            evaluation: None,
            promotion: None,
            error: None,
            workdir: "/w".into(),
        }
    }

    fn event(job: &str, seq: u64, kind: &str) -> JobEvent {
        JobEvent {
            job: job.into(),
            seq,
            at: "2026-11-22T00:00:00Z".into(),
            kind: kind.into(),
            data: serde_json::json!({"n": seq}),
        }
    }

    #[test]
    fn records_and_events_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        {
            let store = JobStore::open(&path).unwrap();
            store
                .insert(&job("a", JobStatus::Queued), &event("a", 1, "queued"))
                .unwrap();
            let mut j = job("a", JobStatus::Running);
            j.progress.step = 7;
            store.save(&j, Some(&event("a", 2, "started"))).unwrap();
            store
                .insert(&job("b", JobStatus::Queued), &event("b", 1, "queued"))
                .unwrap();
            assert!(store.save(&job("zz", JobStatus::Queued), None).is_err());
        }
        let store = JobStore::open(&path).unwrap();
        let a = store.get("a").unwrap().unwrap();
        assert_eq!(a.status, JobStatus::Running);
        assert_eq!(a.progress.step, 7);
        assert_eq!(a.spec.name, "n");
        assert!(store.get("nope").unwrap().is_none());
        let ev = store.events("a", 0).unwrap();
        assert_eq!(
            ev.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
            ["queued", "started"]
        );
        assert_eq!(store.events("a", 1).unwrap().len(), 1);
        assert_eq!(store.last_event_seq("a").unwrap(), 2);
        assert_eq!(store.last_event_seq("none").unwrap(), 0);
        let running = store.with_status(&[JobStatus::Running]).unwrap();
        assert_eq!(running.len(), 1);
        // A duplicate event number is refused, and the record change with it.
        let mut j = job("a", JobStatus::Failed);
        j.error = Some("x".into());
        assert!(store.save(&j, Some(&event("a", 2, "dup"))).is_err());
        assert_eq!(store.get("a").unwrap().unwrap().status, JobStatus::Running);
    }

    #[test]
    fn a_full_disk_refuses_the_change_and_keeps_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        let store = JobStore::open(&path).unwrap();
        store
            .insert(&job("a", JobStatus::Queued), &event("a", 1, "queued"))
            .unwrap();
        // SQLite's own "database or disk is full" path: no page may be added.
        let pages: i64 = store
            .conn()
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        store
            .conn()
            .pragma_update(None, "max_page_count", pages)
            .unwrap();
        let mut big = job("b", JobStatus::Queued);
        big.error = Some("x".repeat(64 * 1024));
        let e = store.insert(&big, &event("b", 1, "queued")).unwrap_err();
        assert!(e.to_string().contains("full"), "{e}");
        assert!(e.to_string().contains("jobs.db"), "{e}");
        // Nothing of the refused change, everything from before.
        assert!(store.get("b").unwrap().is_none());
        assert_eq!(store.events("b", 0).unwrap().len(), 0);
        assert_eq!(store.get("a").unwrap().unwrap().status, JobStatus::Queued);
        drop(store);
        // After a restart with space again, the store works and holds what was acknowledged.
        let store = JobStore::open(&path).unwrap();
        assert!(store.get("a").unwrap().is_some());
        store.insert(&big, &event("b", 1, "queued")).unwrap();
        assert!(store.get("b").unwrap().is_some());
    }

    #[test]
    fn listing_is_newest_first_paginated_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        let store = JobStore::open(&dir.path().join("jobs.db")).unwrap();
        for i in 0..5 {
            let st = if i % 2 == 0 {
                JobStatus::Succeeded
            } else {
                JobStatus::Failed
            };
            let id = format!("j{i}");
            store
                .insert(&job(&id, st), &event(&id, 1, "queued"))
                .unwrap();
        }
        let p1 = store.list(2, None, None).unwrap();
        assert_eq!(
            p1.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
            ["j4", "j3"]
        );
        let p2 = store.list(2, p1.next_page_token.as_deref(), None).unwrap();
        assert_eq!(
            p2.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
            ["j2", "j1"]
        );
        let p3 = store.list(2, p2.next_page_token.as_deref(), None).unwrap();
        assert_eq!(p3.jobs.len(), 1);
        assert!(p3.next_page_token.is_none());
        let failed = store.list(10, None, Some(JobStatus::Failed)).unwrap();
        assert_eq!(failed.jobs.len(), 2);
        assert!(store.list(2, Some("x"), None).is_err());
        let counts = store.counts().unwrap();
        assert!(counts.contains(&(JobStatus::Succeeded, 3)));
        let _: JobSpec = job("x", JobStatus::Queued).spec;
    }
}
