//! Typed errors of the probe runtime; messages reach users unchanged.

#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    #[error("CUDA is not available: {reason}")]
    NoDriver { reason: String },

    #[error("CUDA driver call {call} failed: {name} ({code})")]
    Driver {
        call: &'static str,
        code: u32,
        name: String,
    },

    #[error(
        "this probe is bound to the capture into graph {bound:#x}; a probe binds to one \
         capture. Create a new TensorProbe for each captured graph"
    )]
    SecondCapture { bound: usize },

    #[error(
        "the capture on this stream was invalidated by an earlier error; end it and capture again"
    )]
    CaptureInvalidated,

    #[error("the probe runtime is closed")]
    Closed,

    #[error("no slot {slot} in this probe")]
    NoSuchSlot { slot: usize },

    #[error("a lock in the probe runtime was poisoned by an earlier panic")]
    Poisoned,

    #[error(
        "NVRTC (CUDA's run-time compiler, shipped in torch's CUDA wheels) was not found; \
         set TCGD_NVRTC to libnvrtc.so or its folder. Tried: {tried}"
    )]
    NoCompiler { tried: String },

    #[error("compiling the probe kernels failed: {log}")]
    Compile { log: String },

    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;
