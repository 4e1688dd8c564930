//! A directory's fingerprint for hot reload: a hash of the names and contents of its files with
//! one extension, so a poller recompiles only when something it loads changed. Contents, not
//! modification times: two quick saves of a file of the same size within the clock's resolution
//! would look alike.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// A hash of every file under `dir` (subdirectories included) whose name ends in
/// `.{extension}`: their paths relative to `dir` and their contents. An unreadable file counts by
/// name and error kind; a missing directory hashes as an empty one.
///
/// # Examples
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("a.html.eex"), "<%= @x %>")?;
/// let before = galleon_state::fingerprint(dir.path(), "eex");
/// std::fs::write(dir.path().join("a.html.eex"), "<%= @y %>")?;
/// assert_ne!(galleon_state::fingerprint(dir.path(), "eex"), before);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn fingerprint(dir: &Path, extension: &str) -> u64 {
    let mut files = Vec::new();
    collect(dir, dir, extension, &mut files);
    files.sort();
    let mut h = DefaultHasher::new();
    for (name, path) in files {
        name.hash(&mut h);
        match std::fs::read(&path) {
            Ok(bytes) => bytes.hash(&mut h),
            Err(e) => e.kind().hash(&mut h),
        }
    }
    h.finish()
}

/// `(name relative to root, path)` of every matching file under `dir`.
fn collect(root: &Path, dir: &Path, extension: &str, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect(root, &path, extension, out);
        } else if path.extension().is_some_and(|e| e == extension) {
            let name = path.strip_prefix(root).unwrap_or(&path);
            out.push((name.to_string_lossy().into_owned(), path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_changes_with_names_and_contents_of_matching_files_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pages")).unwrap();
        std::fs::write(dir.path().join("pages/a.html.eex"), "1").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let one = fingerprint(dir.path(), "eex");
        std::fs::write(dir.path().join("notes.txt"), "y").unwrap();
        assert_eq!(
            fingerprint(dir.path(), "eex"),
            one,
            "only *.eex files count"
        );
        std::fs::write(dir.path().join("pages/a.html.eex"), "2").unwrap();
        let two = fingerprint(dir.path(), "eex");
        assert_ne!(two, one, "a subdirectory's file's contents count");
        std::fs::rename(
            dir.path().join("pages/a.html.eex"),
            dir.path().join("pages/b.html.eex"),
        )
        .unwrap();
        assert_ne!(fingerprint(dir.path(), "eex"), two, "names count");
    }

    #[test]
    fn a_missing_directory_is_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let empty = fingerprint(dir.path(), "eex");
        assert_eq!(fingerprint(&dir.path().join("gone"), "eex"), empty);
    }
}
