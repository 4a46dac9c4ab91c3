//! The kernel cache: compiled C libraries (kernels and the CUDA emulator's), private to the user, keyed by a SHA-256
//! of everything the library depends on, verified before they are loaded.
//!
//! - Location: `$FUNCFUSE_CACHE`, else `$XDG_CACHE_HOME/funcfuse`, else `$HOME/.cache/funcfuse`. Folders are created
//!   with mode 0700; a cache folder or file owned by another user, or writable by group or others, is refused with
//!   an error (another user could plant a library that then runs inside this process).
//! - Key: SHA-256 of the compiler's identity (`CC --version`, run once per process and compiler), the flags, the host
//!   CPU (`/proc/cpuinfo`'s model and feature flags, what `-march=native` targets) and the source.
//! - Entry: `<key>.so` and `<key>.sha256`, the library's own digest. Both are written to a temporary file in the same
//!   folder and renamed into place, so a reader sees a whole file or none, and two processes building the same entry
//!   both succeed (the source goes to the compiler on stdin, so the library does not depend on who built it).
//! - Loading: the library's digest must match the stored one, else (and when `dlopen` fails) the entry is rebuilt,
//!   with a note on stderr saying why; a rebuilt library that still fails to load is an error with `dlerror`'s text.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// The cache's root folder (not created or checked here).
pub fn root() -> Result<PathBuf, String> {
    let set = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(p) = set("FUNCFUSE_CACHE") {
        return Ok(p);
    }
    if let Some(p) = set("XDG_CACHE_HOME") {
        return Ok(p.join("funcfuse"));
    }
    match set("HOME") {
        Some(h) => Ok(h.join(".cache").join("funcfuse")),
        None => Err("no kernel cache folder: set FUNCFUSE_CACHE (or XDG_CACHE_HOME or HOME)".into()),
    }
}

/// Why a cache folder cannot be used.
#[derive(Debug)]
pub enum Unusable {
    /// It does not exist and cannot be created.
    Missing(String),
    /// It exists but is not a private folder of this user's: using it would be unsafe.
    Unsafe(String),
}

impl From<Unusable> for String {
    fn from(u: Unusable) -> String {
        match u {
            Unusable::Missing(m) | Unusable::Unsafe(m) => m,
        }
    }
}

/// Creates `dir` (and missing parents) with mode 0700, then checks that the user owns it and nobody else can
/// write to it. Shared by every cache of funcfuse (kernels, rule verdicts).
pub fn private_dir(dir: &Path) -> Result<(), Unusable> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Unusable::Missing(format!("cache {}: cannot create: {e}", dir.display())))?;
    }
    let m = std::fs::metadata(dir).map_err(|e| Unusable::Unsafe(format!("cache {}: {e}", dir.display())))?;
    if !m.is_dir() {
        return Err(Unusable::Unsafe(format!("cache {}: not a directory", dir.display())));
    }
    private(dir, &m, "directory").map_err(Unusable::Unsafe)
}

/// Refuses a cache entry or folder another user owns or could write.
fn private(p: &Path, m: &std::fs::Metadata, what: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return Err(format!(
            "cache {}: the {what} is owned by user id {}, not by you ({me}); refusing to use it (set FUNCFUSE_CACHE to a folder of your own)",
            p.display(),
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "cache {}: the {what} is writable by group or others (mode {:04o}); refusing to use it (chmod go-w it, or set FUNCFUSE_CACHE to a private folder)",
            p.display(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// `cc --version`, once per process and compiler.
fn compiler_identity(cc: &str) -> Result<String, String> {
    static SEEN: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(v) = seen.lock().map_err(|_| "the compiler table is poisoned")?.get(cc) {
        return Ok(v.clone());
    }
    let out = std::process::Command::new(cc)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{cc} --version` failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let v = String::from_utf8_lossy(&out.stdout).to_string();
    seen.lock().map_err(|_| "the compiler table is poisoned")?.insert(cc.to_string(), v.clone());
    Ok(v)
}

/// The host CPU as `-march=native` sees it: the architecture, and the model and feature lines of the first
/// processor in `/proc/cpuinfo` (empty where there is no such file).
fn host_cpu() -> &'static str {
    static CPU: OnceLock<String> = OnceLock::new();
    CPU.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let keys =
            ["model name", "flags", "Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part"];
        let mut s = format!("{}\n", std::env::consts::ARCH);
        for line in info.lines().take_while(|l| !l.trim().is_empty()) {
            if keys.iter().any(|k| line.split(':').next().is_some_and(|n| n.trim() == *k)) {
                s.push_str(line);
                s.push('\n');
            }
        }
        s
    })
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache key of a library: compiler identity, flags, host CPU and source.
fn key(cc: &str, flags: &[String], source: &str) -> Result<String, String> {
    let mut h = Sha256::new();
    for part in [cc, &compiler_identity(cc)?, &flags.join("\u{1f}"), host_cpu(), source] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Ok(hex(&h.finalize()))
}

/// A unique name for a temporary file of this process.
fn unique() -> String {
    static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!("{}-{}", std::process::id(), SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// What the cache holds for a key.
enum Entry {
    Absent,
    /// Private and matching its stored digest.
    Verified,
    /// Present but unusable, and why.
    Bad(String),
}

/// Checks a cached entry; `Err`: refused (owned by another user or writable by others).
fn verify(lib: &Path, digest: &Path) -> Result<Entry, String> {
    let m = match std::fs::symlink_metadata(lib) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entry::Absent),
        Err(e) => return Ok(Entry::Bad(format!("cannot read it: {e}"))),
    };
    private(lib, &m, "file")?;
    if !m.file_type().is_file() {
        return Ok(Entry::Bad("not a regular file".into()));
    }
    let want = match std::fs::symlink_metadata(digest) {
        Ok(dm) => {
            private(digest, &dm, "file")?;
            std::fs::read_to_string(digest).unwrap_or_default()
        }
        Err(_) => return Ok(Entry::Bad("its digest file is missing".into())),
    };
    let bytes = match std::fs::read(lib) {
        Ok(b) => b,
        Err(e) => return Ok(Entry::Bad(format!("cannot read it: {e}"))),
    };
    let got = hex(&Sha256::digest(&bytes));
    if got != want.trim() {
        return Ok(Entry::Bad(format!(
            "its SHA-256 ({got}) is not the one stored when it was built ({})",
            if want.trim().is_empty() { "none" } else { want.trim() }
        )));
    }
    Ok(Entry::Verified)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, renamed into place.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let tmp = path.with_extension(format!("{}.tmp", unique()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("kernel cache {}: cannot write: {e}", path.display())
    })
}

/// Compiles `source` with `cc` and `flags` into entry `stem` of the cache folder `dir`; returns the library's path.
fn build(dir: &Path, stem: &str, source: &str, cc: &str, flags: &[String]) -> Result<PathBuf, String> {
    let tmp = dir.join(format!("{stem}.{}.so.tmp", unique()));
    // Only the C backend's sources are cut (`split`): the CUDA emulator's have another shape.
    let cores = match dir.file_name().and_then(|f| f.to_str()) {
        Some("c") => std::thread::available_parallelism().map_or(1, |n| n.get()).min(8),
        _ => 1,
    };
    match super::split::parts(source, cores) {
        Some(parts) => super::split::build(&parts, cc, flags, &tmp)?,
        None => compile_one(source, cc, flags, &tmp)?,
    }
    let result = (|| {
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        let bytes = std::fs::read(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        // The digest first: a reader that sees the new library sees its digest (builds of one key are identical).
        write_atomic(&dir.join(format!("{stem}.sha256")), hex(&Sha256::digest(&bytes)).as_bytes(), 0o600)?;
        let lib = dir.join(format!("{stem}.so"));
        std::fs::rename(&tmp, &lib).map_err(|e| format!("kernel cache {}: {e}", lib.display()))?;
        Ok(lib)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Compiles `source` with `cc` and `flags` into the library `tmp`, in one process.
fn compile_one(source: &str, cc: &str, flags: &[String], tmp: &Path) -> Result<(), String> {
    let mut args: Vec<std::ffi::OsString> = flags.iter().map(Into::into).collect();
    args.extend(["-o".into(), tmp.into(), "-x".into(), "c".into(), "-".into(), "-lm".into()]);
    let r = Cc::start(cc, &args, source.to_string())?.finish();
    if r.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    r
}

/// A C compiler running on source it reads from stdin (the output then names no temporary file, so every build of
/// one source is the same), fed by a thread of its own.
pub(super) struct Cc {
    child: std::process::Child,
    feeder: std::thread::JoinHandle<std::io::Result<()>>,
    cc: String,
}

impl Cc {
    /// Starts `cc` with `args` (which end in `-x c -`, maybe followed by libraries) on `source`.
    pub(super) fn start(cc: &str, args: &[std::ffi::OsString], source: String) -> Result<Cc, String> {
        let mut child = std::process::Command::new(cc)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("the C compiler's stdin")?;
        let feeder = std::thread::spawn(move || stdin.write_all(source.as_bytes()));
        Ok(Cc { child, feeder, cc: cc.to_string() })
    }

    /// Waits for it: an error where it failed (with its messages) or could not be fed.
    pub(super) fn finish(self) -> Result<(), String> {
        let cc = &self.cc;
        let out = self.child.wait_with_output().map_err(|e| format!("the C compiler `{cc}`: {e}"))?;
        let fed = self.feeder.join().map_err(|_| "the thread writing the compiler's input panicked")?;
        if !out.status.success() {
            return Err(format!("the C compiler rejected the kernels:\n{}", String::from_utf8_lossy(&out.stderr)));
        }
        fed.map_err(|e| format!("writing the kernels to the C compiler: {e}"))
    }
}

/// Compiles `source` (or finds it in the cache folder `folder`) and loads it.
pub fn load(source: &str, cc: &str, flags: &[String], folder: &str) -> Result<libloading::Library, String> {
    let root = root()?;
    private_dir(&root)?;
    let dir = root.join(folder);
    private_dir(&dir)?;
    let stem = key(cc, flags, source)?;
    let (lib, digest) = (dir.join(format!("{stem}.so")), dir.join(format!("{stem}.sha256")));
    match verify(&lib, &digest)? {
        Entry::Verified => {
            // SAFETY: a library of our private cache whose bytes match the digest we stored when we built it from
            // our own source; it has no initializers.
            match unsafe { libloading::Library::new(&lib) } {
                Ok(l) => {
                    crate::log::log(crate::log::Stage::Compile, || format!("cache hit {}", lib.display()));
                    return Ok(l);
                }
                Err(e) => note(&lib, &format!("it does not load ({e})")),
            }
        }
        Entry::Absent => {}
        Entry::Bad(why) => note(&lib, &why),
    }
    let t = std::time::Instant::now();
    let built = build(&dir, &stem, source, cc, flags)?;
    crate::log::log(crate::log::Stage::Compile, || {
        let ms = t.elapsed().as_secs_f64() * 1e3;
        format!(
            "compiled {} lines with {cc} {} in {ms:.0} ms: {}",
            source.lines().count(),
            flags.join(" "),
            built.display()
        )
    });
    // SAFETY: as above, just built.
    unsafe { libloading::Library::new(&built) }
        .map_err(|e| format!("{}: cannot load the kernels: {e}", built.display()))
}

fn note(lib: &Path, why: &str) {
    eprintln!("funcfuse: kernel cache entry {}: {why}; rebuilding it", lib.display());
}
