//! Files under one root directory, each written whole to a temporary name and renamed into
//! place, so a reader sees one version or the next, never half of one — except what
//! [`Tree::write_in_place`] rewrites in place like the sysfs attribute it stands for. A file whose
//! content did not change is not rewritten. What the files hold is [`crate::tree`]'s and the
//! renderers' business: this module knows nothing of the host.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file that marks a directory as the simulator's own.
pub const MARKER: &str = ".storwatch-sim";

/// Writes files under one root, remembering what is already there.
pub struct Tree {
    root: PathBuf,
    written: HashMap<PathBuf, String>,
    n: u64,
}

impl Tree {
    /// A writer for `root`: created if missing; a tree an earlier run left there is cleared
    /// (another scenario's devices must not linger); any other non-empty directory is refused,
    /// so a mistyped `--root` cannot touch files the simulator did not write.
    pub fn new(root: &Path) -> io::Result<Self> {
        let marker = root.join(MARKER);
        let non_empty = match fs::read_dir(root) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        if non_empty {
            if !marker.is_file() {
                return Err(io::Error::other(format!(
                    "{} is not empty and was not written by storwatch-sim (no {MARKER})",
                    root.display()
                )));
            }
            for dir in ["proc", "sys", "run", "bin"] {
                match fs::remove_dir_all(root.join(dir)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        fs::create_dir_all(root)?;
        fs::write(
            &marker,
            "written by storwatch-sim; the whole tree is replaced on restart\n",
        )?;
        // Leftovers of a run killed between a write and its rename.
        match fs::remove_dir_all(root.join(".tmp")) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        fs::create_dir_all(root.join(".tmp"))?;
        Ok(Self {
            root: root.to_owned(),
            written: HashMap::new(),
            n: 0,
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `text` to `rel` atomically, unless it already holds exactly that.
    pub fn write(&mut self, rel: &str, text: &str) -> io::Result<()> {
        let path = self.root.join(rel);
        if self.written.get(&path).is_some_and(|t| t == text) {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        self.n += 1;
        let tmp = self.root.join(".tmp").join(format!("w{}", self.n));
        fs::write(&tmp, text)?;
        fs::rename(&tmp, &path)?;
        self.written.insert(path, text.to_owned());
        Ok(())
    }

    /// Rewrites `rel` in place, as sysfs regenerates an attribute: a reader that keeps the file
    /// open and re-reads it from offset 0 (the agent does this for `device/state`) sees the new
    /// value, which a rename would hide from it behind the old inode. The states written this
    /// way (`running`, `offline`) have the same length, so one small positioned write replaces
    /// the whole content at once.
    pub fn write_in_place(&mut self, rel: &str, text: &str) -> io::Result<()> {
        let path = self.root.join(rel);
        if self.written.get(&path).is_some_and(|t| t == text) {
            return Ok(());
        }
        if !path.exists() {
            return self.write(rel, text);
        }
        let f = fs::OpenOptions::new().write(true).open(&path)?;
        f.write_all_at(text.as_bytes(), 0)?;
        f.set_len(text.len() as u64)?;
        self.written.insert(path, text.to_owned());
        Ok(())
    }

    /// Removes the directory `rel` and everything below it (a cgroup the kernel removed).
    pub fn remove_dir(&mut self, rel: &str) -> io::Result<()> {
        let path = self.root.join(rel);
        self.written.retain(|p, _| !p.starts_with(&path));
        match fs::remove_dir_all(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Writes an executable script.
    pub(crate) fn script(&mut self, rel: &str, text: &str) -> io::Result<()> {
        self.write(rel, text)?;
        let path = self.root.join(rel);
        let mut perm = fs::metadata(&path)?.permissions();
        perm.set_mode(0o755);
        fs::set_permissions(&path, perm)
    }

    /// A symlink `rel` → `target` (replaced if it exists).
    pub(crate) fn link(&self, target: &str, rel: &str) -> io::Result<()> {
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        match fs::symlink_metadata(&path) {
            Ok(_) => fs::remove_file(&path)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        symlink(target, &path)
    }
}
