//! A working dir packed as Ray's own client packs it
//! (`ray/_private/runtime_env/packaging.py`), so a directory `ray job
//! submit` already uploaded is not uploaded again by krayne, and the other
//! way round: the same files left out (Ray's default excludes, every
//! directory's `.gitignore` unless `RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1`,
//! `.rayignore` always), the same content-addressed name
//! (`_ray_pkg_<16 hex>.zip`: an 8-byte XOR of the SHA-1 of each kept path,
//! and its bytes for a file, starting from eight ASCII `0`s), and a stored
//! zip of the files and empty directories.

use std::{
    io::{self, Write as _},
    path::{Path, PathBuf},
};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sha1::{Digest as _, Sha1};

/// Ray's default excludes (`RAY_RUNTIME_ENV_DEFAULT_EXCLUDES`).
pub const DEFAULT_EXCLUDES: [&str; 4] = [".git", ".venv", "venv", "__pycache__"];

/// What to leave out of a package.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Patterns (gitignore syntax, relative to the working dir) left out:
    /// Ray's defaults, or `RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES`.
    pub excludes: Vec<String>,
    /// Honour `.gitignore` files (Ray does unless
    /// `RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1`).
    pub include_gitignore: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        Self {
            excludes: DEFAULT_EXCLUDES.iter().map(|s| (*s).to_owned()).collect(),
            include_gitignore: true,
        }
    }
}

impl PackOptions {
    /// Ray's options as its client reads them from the environment.
    pub fn from_env() -> Self {
        let excludes = match std::env::var("RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES") {
            Ok(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            Err(_) => Self::default().excludes,
        };
        let include_gitignore = std::env::var("RAY_RUNTIME_ENV_IGNORE_GITIGNORE").map_or(true, |v| v != "1");
        Self {
            excludes,
            include_gitignore,
        }
    }
}

/// A packed working dir.
#[derive(Debug, Clone)]
pub struct Package {
    /// `_ray_pkg_<16 hex>.zip`.
    pub name: String,
    /// The stored zip.
    pub zip: Vec<u8>,
    /// Files in it.
    pub files: usize,
    /// Their bytes, all together.
    pub bytes: u64,
    /// Paths left out that are neither a file nor a folder: a link to
    /// nothing (an editor's lock file), a socket, a pipe; each with why.
    pub skipped: Vec<String>,
}

/// `e` naming the path it happened at.
fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// One kept path: relative (`/`-separated; the root is `.`).
struct Entry {
    relative: String,
    absolute: PathBuf,
    kind: Kind,
}

enum Kind {
    File,
    Dir { empty: bool },
}

/// Ignore patterns and the directory they are relative to.
struct Excludes {
    base: String,
    patterns: Gitignore,
}

impl Excludes {
    fn excludes(&self, relative: &str) -> bool {
        let own = if self.base == "." {
            relative
        } else if relative == self.base {
            "."
        } else {
            match relative.strip_prefix(&format!("{}/", self.base)) {
                Some(rest) => rest,
                None => return false,
            }
        };
        // As Ray's pathspec: the path as a string, a directory without its
        // trailing slash (so `build/` leaves out what is under `build`,
        // not `build` itself).
        self.patterns
            .matched_path_or_any_parents(Path::new(own), false)
            .is_ignore()
    }
}

fn ignore_file(dir: &Path, base: &str, name: &str) -> io::Result<Option<Excludes>> {
    let file = dir.join(name);
    if !file.is_file() {
        return Ok(None);
    }
    let mut builder = GitignoreBuilder::new(dir);
    if let Some(e) = builder.add(&file) {
        return Err(io::Error::other(format!("{}: {e}", file.display())));
    }
    let patterns = builder
        .build()
        .map_err(|e| io::Error::other(format!("{}: {e}", file.display())))?;
    Ok(Some(Excludes {
        base: base.to_owned(),
        patterns,
    }))
}

fn join(relative: &str, name: &str) -> String {
    if relative == "." {
        name.to_owned()
    } else {
        format!("{relative}/{name}")
    }
}

/// Walks as Ray's `_dir_travel` does: a directory's ignore files apply to
/// it and below; an excluded directory is not entered.
fn travel(
    absolute: &Path,
    relative: &str,
    excludes: &mut Vec<Excludes>,
    options: &PackOptions,
    walked: &mut Walked,
) -> io::Result<()> {
    // Links are followed, as Ray's client follows them.
    let is_dir = absolute.is_dir();
    let before = excludes.len();
    if is_dir {
        if options.include_gitignore {
            excludes.extend(ignore_file(absolute, relative, ".gitignore")?);
        }
        excludes.extend(ignore_file(absolute, relative, ".rayignore")?);
    }
    if !excludes.iter().any(|e| e.excludes(relative)) {
        if is_dir {
            let mut children: Vec<_> = std::fs::read_dir(absolute)
                .and_then(|entries| entries.collect::<Result<_, _>>())
                .map_err(|e| at(absolute, e))?;
            children.sort_by_key(std::fs::DirEntry::file_name);
            walked.kept.push(Entry {
                relative: relative.to_owned(),
                absolute: absolute.to_owned(),
                kind: Kind::Dir {
                    empty: children.is_empty(),
                },
            });
            for child in children {
                let name = child.file_name().to_string_lossy().into_owned();
                travel(&child.path(), &join(relative, &name), excludes, options, walked)?;
            }
        } else {
            match std::fs::metadata(absolute) {
                Ok(meta) if meta.is_file() => walked.kept.push(Entry {
                    relative: relative.to_owned(),
                    absolute: absolute.to_owned(),
                    kind: Kind::File,
                }),
                Ok(_) => walked
                    .skipped
                    .push(format!("{relative} (not a file: a socket, pipe or device)")),
                Err(e) if absolute.is_symlink() => walked.skipped.push(format!("{relative} (a link to nothing: {e})")),
                Err(e) => return Err(at(absolute, e)),
            }
        }
    }
    excludes.truncate(before);
    Ok(())
}

/// What a walk of a working dir kept, and what it left out besides the
/// excludes.
#[derive(Default)]
struct Walked {
    kept: Vec<Entry>,
    skipped: Vec<String>,
}

fn kept_paths(dir: &Path, options: &PackOptions) -> io::Result<Walked> {
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("Working directory not found: {}", dir.display()),
        ));
    }
    let mut defaults = GitignoreBuilder::new(dir);
    for pattern in &options.excludes {
        defaults
            .add_line(None, pattern)
            .map_err(|e| io::Error::other(format!("exclude {pattern:?}: {e}")))?;
    }
    let defaults = defaults.build().map_err(|e| io::Error::other(e.to_string()))?;
    let mut excludes = vec![Excludes {
        base: ".".into(),
        patterns: defaults,
    }];
    let mut walked = Walked::default();
    travel(dir, ".", &mut excludes, options, &mut walked)?;
    Ok(walked)
}

/// The package name Ray gives `dir`: `_ray_pkg_<16 hex>.zip`.
pub fn package_name(dir: &Path, options: &PackOptions) -> io::Result<String> {
    name_of(&kept_paths(dir, options)?.kept)
}

fn name_of(kept: &[Entry]) -> io::Result<String> {
    let mut hash = [b'0'; 8];
    for entry in kept {
        let mut sha1 = Sha1::new();
        sha1.update(entry.relative.as_bytes());
        if matches!(entry.kind, Kind::File) {
            let mut file = std::fs::File::open(&entry.absolute).map_err(|e| at(&entry.absolute, e))?;
            io::copy(&mut file, &mut DigestWriter(&mut sha1)).map_err(|e| at(&entry.absolute, e))?;
        }
        let digest = sha1.finalize();
        for (h, d) in hash.iter_mut().zip(digest.iter()) {
            *h ^= d;
        }
    }
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("_ray_pkg_{hex}.zip"))
}

struct DigestWriter<'a>(&'a mut Sha1);

impl io::Write for DigestWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Packs `dir` as Ray does: its name and a stored zip of its kept files
/// and empty directories. Refuses (before reading a byte of content) a
/// working dir whose files add up to more than `limit` bytes.
pub fn pack(dir: &Path, options: &PackOptions, limit: u64) -> io::Result<Package> {
    let Walked { kept, skipped } = kept_paths(dir, options)?;
    let mut total = 0u64;
    for entry in &kept {
        if matches!(entry.kind, Kind::File) {
            total += std::fs::metadata(&entry.absolute)
                .map_err(|e| at(&entry.absolute, e))?
                .len();
        }
    }
    if total > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "the working dir {} holds {} MiB after excludes; packages are limited to {} MiB (leave files out with .gitignore or .rayignore)",
                dir.display(),
                total.div_ceil(1024 * 1024),
                limit / (1024 * 1024)
            ),
        ));
    }
    let name = name_of(&kept)?;
    let mut zip = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut files = 0;
    for entry in kept.iter().filter(|e| e.relative != ".") {
        match entry.kind {
            Kind::File => {
                zip.start_file(entry.relative.as_str(), stored)
                    .map_err(io::Error::other)?;
                let mut file = std::fs::File::open(&entry.absolute).map_err(|e| at(&entry.absolute, e))?;
                io::copy(&mut file, &mut zip).map_err(|e| at(&entry.absolute, e))?;
                files += 1;
            }
            Kind::Dir { empty: true } => {
                zip.add_directory(entry.relative.as_str(), stored)
                    .map_err(io::Error::other)?;
            }
            Kind::Dir { empty: false } => {}
        }
    }
    zip.flush()?;
    let zip = zip.finish().map_err(io::Error::other)?.into_inner();
    Ok(Package {
        name,
        zip,
        files,
        bytes: total,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (path → contents; `None`: an empty directory).
    fn tree(files: &[(&str, Option<&str>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, contents) in files {
            let p = dir.path().join(path);
            match contents {
                None => std::fs::create_dir_all(&p).unwrap(),
                Some(text) => {
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, text).unwrap();
                }
            }
        }
        dir
    }

    fn tree_a() -> tempfile::TempDir {
        tree(&[
            ("top.txt", Some("top\n")),
            ("emptydir", None),
            ("pkg/inner/m.py", Some("print('m')\n")),
            ("pkg/.gitignore", Some("*.log\nbuild/\n")),
            ("pkg/debug.log", Some("noise\n")),
            ("pkg/build/out.bin", Some("bin\n")),
            (".rayignore", Some("secret.txt\n")),
            ("secret.txt", Some("s\n")),
            (".git/HEAD", Some("ref\n")),
            (".venv/x", Some("v\n")),
            ("venv/y", Some("v\n")),
            ("__pycache__/z.pyc", Some("c\n")),
            ("pkg/__pycache__/w.pyc", Some("c\n")),
            ("data/input.csv", Some("a,b\n1,2\n")),
        ])
    }

    fn tree_b() -> tempfile::TempDir {
        tree(&[
            (".gitignore", Some("logs/\n!logs/keep.txt\n/anchored.txt\n")),
            ("logs/keep.txt", Some("k\n")),
            ("logs/drop.txt", Some("d\n")),
            ("anchored.txt", Some("x\n")),
            ("sub/anchored.txt", Some("y\n")),
            ("main.sh", Some("echo hi\n")),
        ])
    }

    fn zipped_names(package: &Package) -> Vec<String> {
        let mut archive = zip::ZipArchive::new(io::Cursor::new(package.zip.clone())).unwrap();
        let mut names: Vec<String> = (0..archive.len())
            .map(|i| archive.by_index(i).unwrap().name().unwrap().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The names were computed by Ray 2.60's own `get_uri_for_directory`
    /// (with its default excludes) on the same trees.
    #[test]
    fn names_are_the_ones_ray_computes_for_the_same_trees() {
        let no_gitignore = PackOptions {
            include_gitignore: false,
            ..PackOptions::default()
        };
        let a = tree_a();
        assert_eq!(
            package_name(a.path(), &PackOptions::default()).unwrap(),
            "_ray_pkg_29dcfc041c850b58.zip"
        );
        assert_eq!(
            package_name(a.path(), &no_gitignore).unwrap(),
            "_ray_pkg_a94b0ed31e4b2a7a.zip"
        );
        let b = tree_b();
        assert_eq!(
            package_name(b.path(), &PackOptions::default()).unwrap(),
            "_ray_pkg_70aabc4a43f91cb8.zip"
        );
        assert_eq!(
            package_name(b.path(), &no_gitignore).unwrap(),
            "_ray_pkg_d6e4c4a15fa0511a.zip"
        );
    }

    /// Ray's `_zip_files` put exactly these paths in its zips of the trees.
    #[test]
    fn the_zip_holds_what_rays_holds_stored() {
        let a = pack(tree_a().path(), &PackOptions::default(), u64::MAX).unwrap();
        assert_eq!(a.name, "_ray_pkg_29dcfc041c850b58.zip");
        assert_eq!(
            zipped_names(&a),
            [
                ".rayignore",
                "data/input.csv",
                "emptydir/",
                "pkg/.gitignore",
                "pkg/inner/m.py",
                "top.txt"
            ]
        );
        assert_eq!(a.files, 5);
        let mut archive = zip::ZipArchive::new(io::Cursor::new(a.zip.clone())).unwrap();
        assert_eq!(
            archive.by_name("top.txt").unwrap().compression(),
            zip::CompressionMethod::Stored
        );
        let b = pack(tree_b().path(), &PackOptions::default(), u64::MAX).unwrap();
        assert_eq!(
            zipped_names(&b),
            [".gitignore", "logs/keep.txt", "main.sh", "sub/anchored.txt"]
        );
    }

    #[test]
    fn the_name_does_not_depend_on_order_or_time_and_changes_with_content() {
        let one = tree(&[("a.txt", Some("1")), ("b/c.txt", Some("2"))]);
        let two = tree(&[("b/c.txt", Some("2")), ("a.txt", Some("1"))]);
        let name = |d: &tempfile::TempDir| package_name(d.path(), &PackOptions::default()).unwrap();
        assert_eq!(name(&one), name(&two));
        std::fs::write(two.path().join("a.txt"), "changed").unwrap();
        assert_ne!(name(&one), name(&two));
    }

    /// Reliability 29l (issue 53, item 12; issue 56, item 1).
    #[test]
    fn a_link_to_nothing_is_left_out_and_named_and_ignored_secrets_stay_home() {
        let dir = tree(&[
            ("train.py", Some("print(1)")),
            ("idp.key", Some("-----BEGIN PRIVATE KEY-----")),
            (".rayignore", Some("*.key\n")),
        ]);
        std::os::unix::fs::symlink("/no/such/target", dir.path().join(".#train.py")).unwrap();
        let packed = pack(dir.path(), &PackOptions::default(), 1024 * 1024).unwrap();
        assert_eq!(zipped_names(&packed), [".rayignore", "train.py"]);
        assert_eq!(packed.skipped.len(), 1, "{:?}", packed.skipped);
        assert!(
            packed.skipped[0].starts_with(".#train.py (a link to nothing"),
            "{:?}",
            packed.skipped
        );
        assert_eq!(packed.bytes, 8 + 6);
        let unreadable = tree(&[("sub/a.txt", Some("a"))]);
        let sub = unreadable.path().join("sub");
        std::fs::set_permissions(&sub, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
        let e = pack(unreadable.path(), &PackOptions::default(), 1024 * 1024);
        std::fs::set_permissions(&sub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // Root reads any folder; elsewhere the error names it.
        if let Err(e) = e {
            assert!(e.to_string().contains(&sub.display().to_string()), "{e}");
        }
    }

    #[test]
    fn too_large_or_missing_dirs_are_refused_with_the_reason() {
        let big = tree(&[("data.bin", Some(&"x".repeat(2 * 1024 * 1024)))]);
        let e = pack(big.path(), &PackOptions::default(), 1024 * 1024).unwrap_err();
        assert!(e.to_string().contains("limited to 1 MiB"), "{e}");
        let e = package_name(Path::new("/no/such/dir"), &PackOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), "Working directory not found: /no/such/dir");
    }
}
