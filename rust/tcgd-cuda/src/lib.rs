//! The probe runtime for CUDA graphs: device slots filled by device-to-device copies on
//! every replay, a replay counter kernel, and Print / Check host functions, all enqueued
//! on torch's streams in torch's primary context through the driver API (loaded at run
//! time, so the crate builds and loads on machines without CUDA).

mod driver;
mod error;
mod harvest;
mod host_actions;
mod kernels;
mod memory;
mod nvrtc;
mod runtime;
mod summary;

pub use driver::{ensure_driver, CaptureState};
pub use error::{CudaError, Result};
pub use harvest::{
    Attachment, DeviceRecorder, HarvestedData, HarvestedPoint, HarvestedValue, PointKind,
    RecorderSettings, Sampling, Sink, SiteValue,
};
pub use host_actions::{CheckFailure, CheckSpec, PrintSpec};
pub use memory::{live_device_bytes, live_pinned_bytes};
pub use nvrtc::add_search_dir as add_nvrtc_search_dir;
pub use runtime::{release_deferred, ProbeRuntime};
pub use summary::{
    summarizable_on_device, DeviceRecord, HistoryContents, Trigger, MAX_SITES_PER_LAUNCH,
};

/// The id of the capture `stream` is recording into, or None when it is not capturing.
pub fn capture_id(stream: usize) -> Result<Option<u64>> {
    ensure_driver()?;
    match driver::capture_state(driver::as_stream(stream))? {
        CaptureState::Capturing { id, .. } => Ok(Some(id)),
        CaptureState::Idle => Ok(None),
        CaptureState::Invalidated => Err(CudaError::CaptureInvalidated),
    }
}

/// Whether a CUDA driver can be used here (never panics, unlike a first driver call).
pub fn cuda_available() -> bool {
    ensure_driver().is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_driver_is_an_error_not_a_panic() {
        // On machines with a GPU this creates a runtime; without one it must be a typed
        // error. Either way nothing panics.
        match super::ProbeRuntime::new(0) {
            Ok(runtime) => assert_eq!(runtime.device(), 0),
            Err(e) => assert!(e.to_string().contains("CUDA"), "{e}"),
        }
    }
}
