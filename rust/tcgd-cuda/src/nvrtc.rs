//! CUDA C compiled to PTX at first use with NVRTC, loaded from wherever torch keeps it.
//!
//! torch's CUDA wheels ship `libnvrtc.so.<major>` inside their `nvidia/.../lib` package
//! folder, which is not on the loader path, so the library is opened by path: the folder
//! named by `TCGD_NVRTC` (a file or a directory), then the folders Python registered
//! (`add_search_dir`, from torch's install), then the plain sonames. The PTX is
//! JIT-compiled by the driver for the GPU at hand.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use libloading::Library;

use crate::error::{CudaError, Result};

type Program = *mut c_void;
type Status = c_int;

struct Nvrtc {
    _library: Library,
    /// NVRTC opens its builtins library by soname, which is off the loader path too;
    /// opened first by path, it is found already loaded.
    _builtins: Option<Library>,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    log: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    destroy: unsafe extern "C" fn(*mut Program) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
}

static SEARCH_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Adds a folder to look for `libnvrtc.so*` in (torch's `nvidia/*/lib` folders).
pub fn add_search_dir(dir: impl Into<PathBuf>) {
    if let Ok(mut dirs) = SEARCH_DIRS.lock() {
        let dir = dir.into();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
}

/// The files of `dir` whose names start with `prefix`, newest version first (`.so.13`
/// before `.so.12`); none when the folder cannot be read.
fn libraries_in(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    found.sort();
    found.reverse();
    found
}

fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    // `libnvrtc.alt` and the builtins are other libraries.
    let nvrtc_in = |dir: &Path| libraries_in(dir, "libnvrtc.so");
    if let Some(value) = std::env::var_os("TCGD_NVRTC") {
        let path = PathBuf::from(value);
        if path.is_dir() {
            out.extend(nvrtc_in(&path));
        } else {
            out.push(path);
        }
    }
    if let Ok(dirs) = SEARCH_DIRS.lock() {
        for dir in dirs.iter() {
            out.extend(nvrtc_in(dir));
        }
    }
    for soname in ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"] {
        out.push(PathBuf::from(soname));
    }
    out
}

fn symbol<T: Copy>(library: &Library, name: &[u8]) -> std::result::Result<T, String> {
    // SAFETY: the caller names an NVRTC entry point whose C signature is `T`.
    unsafe { library.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| e.to_string())
}

fn builtins_beside(path: &Path) -> Option<Library> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    // SAFETY: as for NVRTC itself below.
    libraries_in(dir, "libnvrtc-builtins.so")
        .iter()
        .find_map(|p| unsafe { Library::new(p) }.ok())
}

fn open(path: &Path) -> std::result::Result<Nvrtc, String> {
    let builtins = builtins_beside(path);
    // SAFETY: loading NVRTC runs its initialisers only; it has no other side effects.
    let library = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    Ok(Nvrtc {
        create: symbol(&library, b"nvrtcCreateProgram\0")?,
        compile: symbol(&library, b"nvrtcCompileProgram\0")?,
        ptx_size: symbol(&library, b"nvrtcGetPTXSize\0")?,
        ptx: symbol(&library, b"nvrtcGetPTX\0")?,
        log_size: symbol(&library, b"nvrtcGetProgramLogSize\0")?,
        log: symbol(&library, b"nvrtcGetProgramLog\0")?,
        destroy: symbol(&library, b"nvrtcDestroyProgram\0")?,
        error_string: symbol(&library, b"nvrtcGetErrorString\0")?,
        _library: library,
        _builtins: builtins,
    })
}

fn nvrtc() -> Result<&'static Nvrtc> {
    static LOADED: OnceLock<Mutex<Option<&'static Nvrtc>>> = OnceLock::new();
    let cell = LOADED.get_or_init(Default::default);
    let mut loaded = cell.lock().map_err(|_| CudaError::Poisoned)?;
    if let Some(n) = *loaded {
        return Ok(n);
    }
    let mut tried = Vec::new();
    for path in candidates() {
        match open(&path) {
            Ok(n) => {
                // Kept for the life of the process: compiled modules outlive any caller.
                let n: &'static Nvrtc = Box::leak(Box::new(n));
                *loaded = Some(n);
                return Ok(n);
            }
            Err(e) => tried.push(format!("{}: {e}", path.display())),
        }
    }
    Err(CudaError::NoCompiler {
        tried: tried.join("; "),
    })
}

impl Nvrtc {
    fn status(&self, call: &'static str, status: Status) -> Result<()> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr((self.error_string)(status)) }
            .to_string_lossy()
            .into_owned();
        Err(CudaError::Compile {
            log: format!("{call}: {text}"),
        })
    }
}

/// Compiles CUDA C `source` for `compute_<arch>` (e.g. 90) and returns NUL-terminated PTX.
pub fn compile_ptx(source: &str, name: &str, arch: u32, defines: &[String]) -> Result<Vec<u8>> {
    let n = nvrtc()?;
    let source =
        CString::new(source).map_err(|_| CudaError::Invalid("NUL in kernel source".into()))?;
    let name = CString::new(name).map_err(|_| CudaError::Invalid("NUL in kernel name".into()))?;
    let mut options = vec![
        CString::new(format!("--gpu-architecture=compute_{arch}")).expect("no NUL"),
        CString::new("--std=c++17").expect("no NUL"),
    ];
    for d in defines {
        options.push(
            CString::new(format!("-D{d}"))
                .map_err(|_| CudaError::Invalid("NUL in define".into()))?,
        );
    }
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let mut program: Program = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string; no headers are passed.
    n.status("nvrtcCreateProgram", unsafe {
        (n.create)(
            &mut program,
            source.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    // SAFETY: `program` was created above; the options outlive the call.
    let compiled =
        unsafe { (n.compile)(program, option_ptrs.len() as c_int, option_ptrs.as_ptr()) };
    let result = if compiled != 0 {
        let mut size = 0usize;
        // SAFETY: `program` is live; the buffer has the size NVRTC reported.
        let log = unsafe {
            (n.log_size)(program, &mut size);
            let mut buffer = vec![0u8; size.max(1)];
            (n.log)(program, buffer.as_mut_ptr().cast());
            String::from_utf8_lossy(&buffer)
                .trim_end_matches('\0')
                .to_owned()
        };
        Err(CudaError::Compile { log })
    } else {
        let mut size = 0usize;
        // SAFETY: as above.
        n.status("nvrtcGetPTXSize", unsafe {
            (n.ptx_size)(program, &mut size)
        })
        .and_then(|()| {
            let mut ptx = vec![0u8; size.max(1)];
            // SAFETY: `ptx` has the size NVRTC reported (the terminating NUL included).
            n.status("nvrtcGetPTX", unsafe {
                (n.ptx)(program, ptx.as_mut_ptr().cast())
            })
            .map(|()| ptx)
        })
    };
    // SAFETY: destroyed once.
    unsafe { (n.destroy)(&mut program) };
    result
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Compiles a kernel when NVRTC can be found (torch's wheels bring it; the test
    /// machine's venv has it). Needs no GPU: NVRTC only produces PTX.
    /// Registers the test machine's torch NVRTC folders (the project's venv).
    pub(crate) fn register_venv_nvrtc() {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/lib");
        if let Ok(entries) = std::fs::read_dir(&venv) {
            for python in entries.flatten() {
                add_search_dir(python.path().join("site-packages/nvidia/cu13/lib"));
                add_search_dir(python.path().join("site-packages/nvidia/cuda_nvrtc/lib"));
            }
        }
    }

    #[test]
    fn compiles_a_kernel_or_says_why_not() {
        register_venv_nvrtc();
        let source = "extern \"C\" __global__ void k(int* x) { x[threadIdx.x] += 1; }";
        match compile_ptx(source, "k.cu", 80, &[]) {
            Ok(ptx) => {
                let text = String::from_utf8_lossy(&ptx);
                assert!(text.contains(".entry k"), "{text}");
            }
            Err(CudaError::NoCompiler { tried }) => assert!(!tried.is_empty()),
            Err(e) => panic!("{e}"),
        }
    }
}
