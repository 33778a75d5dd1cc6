//! The head's package store (Ray's GCS `gcs://` URIs): what
//! `PUT /api/packages/gcs/{name}` uploads, kept on disk, and unpacked as a
//! job's working dir.

use std::{
    collections::HashMap,
    io,
    path::{Path, PathBuf},
};

/// The GCS store's cap.
pub(super) const MAX_TOTAL: u64 = 512 * 1024 * 1024;
/// What a working dir may unpack to.
const MAX_UNPACKED: u64 = 1024 * 1024 * 1024;

/// Uploaded packages: name (as in `gcs://{name}`) → file and size.
#[derive(Default)]
pub(super) struct Packages {
    files: HashMap<String, (PathBuf, u64)>,
    next: u64,
}

impl Packages {
    pub(super) fn get(&self, name: &str) -> Option<PathBuf> {
        self.files.get(name).map(|(path, _)| path.clone())
    }

    /// A fresh file name under `dir` for an upload (names are the
    /// client's, so never used as paths).
    pub(super) fn new_file(&mut self, dir: &Path) -> PathBuf {
        self.next += 1;
        dir.join(format!("package-{}", self.next))
    }

    /// Keeps an uploaded file as `name`, replacing an earlier one; refuses
    /// it (and removes it) when the store would pass [`MAX_TOTAL`].
    pub(super) fn keep(&mut self, name: &str, file: PathBuf, size: u64) -> Result<(), String> {
        let others: u64 = self
            .files
            .iter()
            .filter(|(n, _)| n.as_str() != name)
            .map(|(_, (_, s))| s)
            .sum();
        if others + size > MAX_TOTAL {
            let _ = std::fs::remove_file(&file);
            return Err(format!(
                "the package store is full: {} bytes kept, {size} more would pass its {MAX_TOTAL}",
                others
            ));
        }
        if let Some((old, _)) = self.files.insert(name.to_owned(), (file, size)) {
            let _ = std::fs::remove_file(old);
        }
        Ok(())
    }
}

/// Unpacks a zip into `into`, as Ray unpacks a working dir (paths that
/// would leave it are refused by the zip reader).
pub(super) fn unpack(zip: &Path, into: &Path) -> Result<(), String> {
    let file = std::fs::File::open(zip).map_err(|e| format!("OSError: {e}"))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| format!("zipfile.BadZipFile: {e}"))?;
    let mut unpacked = 0u64;
    for i in 0..archive.len() {
        let entry = archive.by_index(i).map_err(|e| format!("zipfile.BadZipFile: {e}"))?;
        unpacked = unpacked.saturating_add(entry.size());
    }
    if unpacked > MAX_UNPACKED {
        return Err(format!(
            "OSError: the working dir unpacks to {unpacked} bytes, more than {MAX_UNPACKED}"
        ));
    }
    archive.extract(into).map_err(|e| format!("zipfile.BadZipFile: {e}"))
}

/// Creates `dir` and its parents.
pub(super) fn ensure_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn zip_with(path: &Path, files: &[(&str, &[u8])]) {
        let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in files {
            w.start_file(*name, opts).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn a_zip_unpacks_and_garbage_is_a_bad_zip() {
        let dir = tempfile::tempdir().unwrap();
        let zip = dir.path().join("p.zip");
        zip_with(&zip, &[("top.txt", b"hello"), ("pkg/inner/m.py", b"x = 1")]);
        let into = dir.path().join("wd");
        unpack(&zip, &into).unwrap();
        assert_eq!(std::fs::read(into.join("top.txt")).unwrap(), b"hello");
        assert_eq!(std::fs::read(into.join("pkg/inner/m.py")).unwrap(), b"x = 1");

        std::fs::write(&zip, b"not a zip").unwrap();
        assert!(unpack(&zip, &into).unwrap_err().starts_with("zipfile.BadZipFile"));
    }

    #[test]
    fn the_store_keeps_the_newest_upload_and_refuses_past_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Packages::default();
        let a = p.new_file(dir.path());
        std::fs::write(&a, b"a").unwrap();
        p.keep("x.zip", a.clone(), 1).unwrap();
        let b = p.new_file(dir.path());
        std::fs::write(&b, b"b").unwrap();
        p.keep("x.zip", b.clone(), 1).unwrap();
        assert_eq!(p.get("x.zip"), Some(b));
        assert!(!a.exists(), "the replaced upload is removed");
        let c = p.new_file(dir.path());
        std::fs::write(&c, b"c").unwrap();
        assert!(p.keep("y.zip", c.clone(), MAX_TOTAL).is_err());
        assert!(!c.exists() && p.get("y.zip").is_none());
    }
}
