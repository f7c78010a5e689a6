//! ONNX Runtime: finding the shared library, one process-wide environment, and the choice of
//! execution provider (CUDA when asked and available, else CPU — always saying which).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

use super::EncoderError;

/// Environment variable naming the ONNX Runtime shared library (as the `ort` crate documents).
pub const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// Where the set-up script puts the library, relative to the project root.
pub const DEFAULT_ORT_RELATIVE: &str = "assets/onnxruntime/lib/libonnxruntime.so";

/// Where the set-up script puts the library, relative to the assets directory.
const ORT_IN_ASSETS: &str = "onnxruntime/lib/libonnxruntime.so";

/// Environment variable naming the assets directory the set-up script fills.
const ASSETS_ENV: &str = "CAPOT_ASSETS";

/// Which device runs inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    /// A CUDA GPU by ordinal; an error if none is usable.
    Cuda(i32),
    /// CUDA when it works, else CPU with a warning.
    Auto,
}

impl std::str::FromStr for Device {
    type Err = EncoderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            EncoderError::Config(format!(
                "invalid device {s:?}: expected cpu, cuda, cuda:N or auto"
            ))
        };
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "auto" => Ok(Device::Auto),
            _ => {
                let n = s.strip_prefix("cuda:").ok_or_else(bad)?;
                n.parse::<i32>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .map(Device::Cuda)
                    .ok_or_else(bad)
            }
        }
    }
}

/// The execution provider a session actually runs on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Cpu,
    Cuda { device: i32 },
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provider::Cpu => f.write_str("cpu"),
            Provider::Cuda { device } => write!(f, "cuda:{device}"),
        }
    }
}

/// Session settings shared by every encoder of a process.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Explicit library path (flag or config); wins over the environment variable.
    pub library: Option<PathBuf>,
    pub device: Device,
    /// Threads per inference (ORT intra-op); `None` = ORT's default (all cores).
    pub intra_threads: Option<usize>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            library: None,
            device: Device::Cpu,
            intra_threads: None,
        }
    }
}

/// Finds the ONNX Runtime library: the explicit path, then `ORT_DYLIB_PATH`, then the set-up
/// script's location in `$CAPOT_ASSETS`, beside the working directory or the executable.
pub fn locate_library(explicit: Option<&Path>) -> Result<PathBuf, EncoderError> {
    let mut tried = Vec::new();
    let candidates = library_candidates(
        explicit,
        std::env::var_os(ORT_DYLIB_ENV),
        std::env::var_os(ASSETS_ENV),
        std::env::current_exe().ok(),
    );
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        tried.push(c.display().to_string());
    }
    Err(EncoderError::RuntimeMissing(format!(
        "ONNX Runtime library not found (looked at: {}). Run `scripts/setup` to fetch it, or point \
         {ORT_DYLIB_ENV} (or --ort-library) at libonnxruntime.so",
        tried.join(", ")
    )))
}

/// Where [`locate_library`] looks, in order, given the flag, `ORT_DYLIB_PATH`, `CAPOT_ASSETS`
/// and the executable's path.
fn library_candidates(
    explicit: Option<&Path>,
    ort_env: Option<std::ffi::OsString>,
    assets_env: Option<std::ffi::OsString>,
    exe: Option<PathBuf>,
) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_path_buf()];
    }
    if let Some(p) = ort_env.filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let mut candidates: Vec<PathBuf> = assets_env
        .filter(|p| !p.is_empty())
        .map(|assets| PathBuf::from(assets).join(ORT_IN_ASSETS))
        .into_iter()
        .collect();
    candidates.push(PathBuf::from(DEFAULT_ORT_RELATIVE));
    if let Some(exe) = exe {
        // target/<profile>/capot → project root two or three levels up.
        for up in exe.ancestors().skip(1).take(4) {
            candidates.push(up.join(DEFAULT_ORT_RELATIVE));
        }
    }
    candidates.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_ORT_RELATIVE));
    candidates
}

static ENVIRONMENT: OnceLock<Result<(Environment, PathBuf), String>> = OnceLock::new();

/// The process-wide ONNX Runtime environment, loading the library on first use. The library is
/// checked for existence first: a missing library would make `ort` panic on its first call.
pub fn environment(library: Option<&Path>) -> Result<&'static Environment, EncoderError> {
    let result = ENVIRONMENT.get_or_init(|| {
        let path = locate_library(library).map_err(|e| e.to_string())?;
        let builder = ort::init_from(&path)
            .map_err(|e| format!("cannot load ONNX Runtime from {}: {e}", path.display()))?;
        let env = builder
            .with_name("capot")
            .build()
            .map_err(|e| format!("cannot start ONNX Runtime from {}: {e}", path.display()))?;
        tracing::debug!(library = %path.display(), "ONNX Runtime loaded");
        Ok((env, path))
    });
    match result {
        Ok((env, _)) => Ok(env),
        Err(message) => Err(EncoderError::RuntimeMissing(message.clone())),
    }
}

/// The library path the environment was loaded from, once loaded.
pub fn loaded_library() -> Option<PathBuf> {
    ENVIRONMENT
        .get()
        .and_then(|r| r.as_ref().ok())
        .map(|(_, p)| p.clone())
}

/// Creates a session for an ONNX file on the requested device and reports the provider in use.
pub fn create_session(
    onnx: &Path,
    options: &RuntimeOptions,
) -> Result<(Session, Provider), EncoderError> {
    let env = environment(options.library.as_deref())?;
    match options.device {
        Device::Cpu => Ok((cpu_session(env, onnx, options)?, Provider::Cpu)),
        Device::Cuda(id) => {
            cuda_session(env, onnx, options, id).map(|s| (s, Provider::Cuda { device: id }))
        }
        Device::Auto => match cuda_session(env, onnx, options, 0) {
            Ok(s) => Ok((s, Provider::Cuda { device: 0 })),
            Err(e) => {
                tracing::warn!("CUDA unavailable ({e}); falling back to CPU");
                Ok((cpu_session(env, onnx, options)?, Provider::Cpu))
            }
        },
    }
}

fn builder(
    env: &Environment,
    options: &RuntimeOptions,
) -> Result<ort::session::builder::SessionBuilder, EncoderError> {
    let ort_err =
        |e: ort::Error<ort::session::builder::SessionBuilder>| EncoderError::Runtime(e.to_string());
    let mut b = Session::builder(env)
        .map_err(|e| EncoderError::Runtime(e.to_string()))?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(ort_err)?;
    if let Some(n) = options.intra_threads {
        b = b.with_intra_threads(n).map_err(ort_err)?;
    }
    Ok(b)
}

fn cpu_session(
    env: &Environment,
    onnx: &Path,
    options: &RuntimeOptions,
) -> Result<Session, EncoderError> {
    builder(env, options)?
        .commit_from_file(onnx)
        .map_err(|e| EncoderError::Runtime(format!("{}: {e}", onnx.display())))
}

#[cfg(feature = "cuda")]
fn cuda_session(
    env: &Environment,
    onnx: &Path,
    options: &RuntimeOptions,
    device: i32,
) -> Result<Session, EncoderError> {
    let ep = ort::ep::CUDA::default()
        .with_device_id(device)
        .build()
        .error_on_failure();
    builder(env, options)?
        .with_execution_providers([ep])
        .map_err(|e| EncoderError::Runtime(format!("CUDA execution provider: {e}")))?
        .commit_from_file(onnx)
        .map_err(|e| EncoderError::Runtime(format!("{}: {e}", onnx.display())))
}

#[cfg(not(feature = "cuda"))]
fn cuda_session(
    _env: &Environment,
    _onnx: &Path,
    _options: &RuntimeOptions,
    _device: i32,
) -> Result<Session, EncoderError> {
    Err(EncoderError::Config(
        "this build has no CUDA support; rebuild with `--features cuda` and the onnxruntime-gpu libraries".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_looked_for_in_the_assets_directory_named_before_the_usual_places() {
        let exe = Some(PathBuf::from("/opt/capot/target/release/capot"));
        let found = library_candidates(None, None, Some("/srv/assets".into()), exe.clone());
        assert_eq!(
            found[0],
            Path::new("/srv/assets/onnxruntime/lib/libonnxruntime.so")
        );
        assert_eq!(found[1], Path::new(DEFAULT_ORT_RELATIVE));
        assert!(found.contains(&PathBuf::from("/opt/capot").join(DEFAULT_ORT_RELATIVE)));
        // Unset or empty, the assets directory adds nothing; the flag and ORT_DYLIB_PATH are
        // the only place looked at when given.
        let usual = library_candidates(None, None, None, exe.clone());
        assert_eq!(
            usual,
            library_candidates(None, None, Some("".into()), exe.clone())
        );
        assert_eq!(usual, found[1..]);
        assert_eq!(
            library_candidates(
                None,
                Some("/x/libonnxruntime.so".into()),
                Some("/a".into()),
                None
            ),
            [PathBuf::from("/x/libonnxruntime.so")]
        );
        assert_eq!(
            library_candidates(Some(Path::new("/y.so")), Some("/x.so".into()), None, None),
            [PathBuf::from("/y.so")]
        );
    }

    #[test]
    fn parses_devices() {
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::Cuda(3));
        assert_eq!("auto".parse::<Device>().unwrap(), Device::Auto);
        for bad in ["gpu", "cuda:", "cuda:-1", "cuda:x", ""] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
    }

    #[test]
    fn missing_library_is_a_clear_error() {
        let err = locate_library(Some(Path::new("/nonexistent/libonnxruntime.so"))).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("/nonexistent/libonnxruntime.so") && msg.contains("scripts/setup"),
            "{msg}"
        );
    }
}
