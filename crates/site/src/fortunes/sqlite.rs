//! `/fortunes` on embedded SQLite: a fixed set of connections to one database (in memory by
//! default, shared between the connections through SQLite's shared cache, or a file), each
//! with the query prepared and cached; a request takes a free one, or waits for the next in
//! turn. rusqlite blocks, so the query runs where the site's pool puts it (`mod.rs`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use anyhow::Context;
use rusqlite::{Connection, OpenFlags};

use super::{CANONICAL, Fortune, Source};

/// Distinguishes the in-memory databases of several sites in one process (tests).
static MEMORY_DBS: AtomicU64 = AtomicU64::new(0);

/// The SQLite database of `/fortunes`.
#[derive(Debug)]
pub struct Sqlite {
    connections: Box<[Mutex<Connection>]>,
    next: AtomicUsize,
    select: String,
}

impl Sqlite {
    /// Opens `n` (at least 1) connections to `source` (`Memory` or `SqliteFile`) and creates and
    /// seeds `table` when it is missing or empty.
    pub fn open(source: &Source, table: &str, n: usize) -> anyhow::Result<Sqlite> {
        let (uri, what) = match source {
            Source::Memory => {
                let k = MEMORY_DBS.fetch_add(1, Ordering::Relaxed);
                let id = std::process::id();
                (
                    format!("file:galleon-fortunes-{id}-{k}?mode=memory&cache=shared"),
                    "the in-memory fortunes database".to_owned(),
                )
            }
            Source::SqliteFile(path) => (
                path.to_string_lossy().into_owned(),
                format!("the fortunes database {}", path.display()),
            ),
            other => anyhow::bail!("not an SQLite source: {other:?}"),
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let open =
            || Connection::open_with_flags(&uri, flags).with_context(|| format!("opening {what}"));
        let first = open()?;
        seed(&first, table).with_context(|| format!("creating the table {table} in {what}"))?;
        let select = format!("SELECT id, message FROM {table}");
        let mut connections = vec![Mutex::new(first)];
        for _ in 1..n.max(1) {
            connections.push(Mutex::new(open()?));
        }
        let db = Sqlite {
            connections: connections.into_boxed_slice(),
            next: AtomicUsize::new(0),
            select,
        };
        // Prepares the query on every connection now: a bad table fails the start, not a request.
        for c in db.connections.iter() {
            let c = c.lock().unwrap_or_else(PoisonError::into_inner);
            c.prepare_cached(&db.select)
                .with_context(|| format!("preparing {:?} on {what}", db.select))?;
        }
        Ok(db)
    }

    /// Reads every row and renders the page. Errors are for the log.
    pub fn page(&self) -> Result<galleon_iolist::IoList, String> {
        let rows = self
            .rows()
            .map_err(|e| format!("reading the fortunes: {e}"))?;
        let fortunes = rows
            .iter()
            .map(|(id, message)| Fortune { id: *id, message })
            .collect();
        super::render(fortunes).map_err(|e| format!("rendering the fortunes: {e}"))
    }

    /// Every row of the table, on a free connection (or the next in turn, waiting for it).
    fn rows(&self) -> rusqlite::Result<Vec<(i32, String)>> {
        let n = self.connections.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let conn = (0..n)
            .find_map(|i| self.connections[(start + i) % n].try_lock().ok())
            .unwrap_or_else(|| {
                self.connections[start]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            });
        let mut stmt = conn.prepare_cached(&self.select)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mut out = Vec::with_capacity(CANONICAL.len() + 1);
        for row in rows {
            out.push(row?);
        }
        Ok(out)
    }
}

/// Creates `table` when missing and fills it with the canonical rows when empty.
fn seed(conn: &Connection, table: &str) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY, message TEXT NOT NULL)"
    ))?;
    let count: i64 = conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
    if count == 0 {
        let mut insert = conn.prepare(&format!(
            "INSERT INTO {table} (id, message) VALUES (?1, ?2)"
        ))?;
        for (id, message) in CANONICAL {
            insert.execute(rusqlite::params![id, message])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_seeded_once_and_read_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.db");
        let source = Source::SqliteFile(path.clone());
        let db = Sqlite::open(&source, "fortune", 2).unwrap();
        let page = db.page().unwrap().to_vec();
        assert_eq!(page, super::super::tests::EXPECTED.as_bytes());
        // A row added behind the server's back shows in the next response: nothing is cached.
        let other = Connection::open(&path).unwrap();
        other
            .execute("INSERT INTO fortune VALUES (13, 'zz <b>')", [])
            .unwrap();
        let page = String::from_utf8(db.page().unwrap().to_vec()).unwrap();
        // Sorted among the others: "zz" before the Japanese fortune (UTF-8 bytes above ASCII).
        assert!(
            page.contains("<tr><td>13</td><td>zz &lt;b&gt;</td></tr><tr><td>12</td>"),
            "{page}"
        );
        drop(db);
        // Opened again: not seeded twice.
        let db = Sqlite::open(&source, "fortune", 1).unwrap();
        assert_eq!(db.rows().unwrap().len(), 13);
    }

    #[test]
    fn memory_databases_are_private_and_every_connection_sees_the_rows() {
        let a = Sqlite::open(&Source::Memory, "fortune", 3).unwrap();
        let b = Sqlite::open(&Source::Memory, "fortune", 1).unwrap();
        for _ in 0..4 {
            assert_eq!(a.rows().unwrap().len(), 12);
        }
        a.connections[0]
            .lock()
            .unwrap()
            .execute("DELETE FROM fortune WHERE id = 1", [])
            .unwrap();
        assert_eq!(
            a.connections[2]
                .lock()
                .unwrap()
                .query_row("SELECT count(*) FROM fortune", [], |r| r.get::<_, i64>(0))
                .unwrap(),
            11
        );
        assert_eq!(b.rows().unwrap().len(), 12);
    }

    #[test]
    fn a_table_of_another_shape_fails_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE fortune (x INTEGER)")
            .unwrap();
        let e = Sqlite::open(&Source::SqliteFile(path), "fortune", 1).unwrap_err();
        assert!(format!("{e:#}").contains("fortunes database"), "{e:#}");
    }
}
