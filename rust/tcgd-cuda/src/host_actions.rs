//! Print and Check: host functions that run on every replay, after the value and the
//! replay counter were copied into pinned memory on the same stream.
//!
//! They run on a CUDA driver thread, so they never call CUDA or Python, never block on a
//! lock another thread could hold for long, and never unwind (a panic is caught and
//! dropped).

use std::ffi::c_void;
use std::fmt::Write as _;
use std::io::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tcgd_tensor::decode::{decode_complex, decode_real, integer_at};
use tcgd_tensor::{summarize, CloseRule, DType};

use crate::memory::PinnedBuffer;

#[derive(Debug, Clone)]
pub struct PrintSpec {
    pub probe: String,
    pub name: String,
    pub invocation: i64,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub max_items: usize,
    pub every: u64,
    pub summary: bool,
}

#[derive(Debug, Clone)]
pub struct CheckSpec {
    pub name: String,
    pub invocation: i64,
    pub dtype: DType,
    /// Expected values, contiguous, `expected_dtype`, same number of elements.
    pub expected: Vec<u8>,
    pub expected_dtype: DType,
    pub rtol: f64,
    pub atol: f64,
    pub equal_nan: bool,
}

/// The first element that failed a check; kept until the probe is closed.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckFailure {
    pub replay: u64,
    pub name: String,
    pub invocation: i64,
    /// Flat (row-major) index of the element.
    pub element: u64,
    pub actual: String,
    pub expected: String,
}

/// What every check of one probe reports into.
#[derive(Debug, Default)]
pub struct CheckLog {
    pub evaluations: AtomicU64,
    pub failures: AtomicU64,
    pub first: Mutex<Option<CheckFailure>>,
    /// Host address of the probe's history freeze word (0: none): a failure freezes the
    /// history rings at its replay (the flight recorder's failed-check trigger).
    pub freeze: AtomicU64,
}

pub(crate) enum ActionKind {
    Print(PrintSpec),
    Check(CheckSpec, Arc<CheckLog>),
}

pub(crate) struct HostAction {
    pub kind: ActionKind,
    /// The slot whose value the action reads.
    pub slot: usize,
    pub value: PinnedBuffer,
    pub replay: PinnedBuffer,
}

/// The host function enqueued with `cuLaunchHostFunc`; `user` is a `*const HostAction`
/// kept alive by the probe's resources for as long as any graph can replay.
pub(crate) unsafe extern "C" fn run_host_action(user: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `user` points to a boxed HostAction owned by live resources (see the
        // function comment); the copies into its buffers precede this call on the stream.
        let action = unsafe { &*(user as *const HostAction) };
        // SAFETY: stream order: both copies completed before this host function runs.
        let (value, replay) = unsafe { (action.value.bytes(), action.replay.bytes()) };
        let replay = u64::from_le_bytes(replay[..8].try_into().unwrap_or([0; 8]));
        match &action.kind {
            ActionKind::Print(spec) => print_value(spec, replay, value),
            ActionKind::Check(spec, log) => check_value(spec, log, replay, value),
        }
    }));
}

fn format_value(dtype: DType, bytes: &[u8], index: usize) -> String {
    if let Some(i) = integer_at(dtype, bytes, index) {
        return if dtype == DType::Bool {
            (i != 0).to_string()
        } else {
            i.to_string()
        };
    }
    let size = dtype.itemsize();
    let Some(raw) = bytes.get(index * size..(index + 1) * size) else {
        return "?".into();
    };
    if dtype.is_complex() {
        let mut out = [(0.0, 0.0)];
        match decode_complex(dtype, raw, &mut out) {
            Ok(1) => format!("{}{:+}j", out[0].0, out[0].1),
            _ => "?".into(),
        }
    } else {
        let mut out = [0.0];
        match decode_real(dtype, raw, &mut out) {
            Ok(1) => format!("{}", out[0]),
            _ => "?".into(),
        }
    }
}

fn print_value(spec: &PrintSpec, replay: u64, value: &[u8]) {
    if spec.every > 1 && replay % spec.every != 0 {
        return;
    }
    let numel = value.len() / spec.dtype.itemsize().max(1);
    let shown = numel.min(spec.max_items);
    let mut line = String::new();
    let _ = write!(
        line,
        "[tcgd] probe={} replay={} name={} invocation={} {}{:?}: [",
        spec.probe, replay, spec.name, spec.invocation, spec.dtype, spec.shape
    );
    for i in 0..shown {
        if i > 0 {
            line.push_str(", ");
        }
        line.push_str(&format_value(spec.dtype, value, i));
    }
    if shown < numel {
        let _ = write!(line, ", ... ({} more)", numel - shown);
    }
    line.push(']');
    if spec.summary {
        if let Ok(s) = summarize(spec.dtype, value) {
            let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.6}"));
            let _ = write!(
                line,
                " min={} max={} mean={} std={} nan={} inf={}",
                opt(s.min),
                opt(s.max),
                opt(s.mean),
                opt(s.std),
                s.nan_count,
                s.pos_inf_count + s.neg_inf_count
            );
        }
    }
    line.push('\n');
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// The check's tolerance as the one closeness rule of tensor comparisons states it.
fn close_rule(spec: &CheckSpec) -> CloseRule {
    CloseRule {
        atol: spec.atol,
        rtol: spec.rtol,
        equal_nan: spec.equal_nan,
    }
}

/// The index of the first element that fails, if any.
pub(crate) fn first_mismatch(spec: &CheckSpec, value: &[u8]) -> Option<usize> {
    let (vd, ed) = (spec.dtype, spec.expected_dtype);
    let numel = value.len() / vd.itemsize().max(1);
    if numel == 0 {
        return None;
    }
    if integer_at(vd, value, 0).is_some() && integer_at(ed, &spec.expected, 0).is_some() {
        // Integers compare exactly over their whole range.
        return (0..numel).find(|&i| integer_at(vd, value, i) != integer_at(ed, &spec.expected, i));
    }
    if vd.is_complex() || ed.is_complex() {
        let decode = |dtype: DType, bytes: &[u8], i: usize| -> (f64, f64) {
            let size = dtype.itemsize();
            let raw = &bytes[i * size..(i + 1) * size];
            if dtype.is_complex() {
                let mut out = [(0.0, 0.0)];
                let _ = decode_complex(dtype, raw, &mut out);
                out[0]
            } else {
                let mut out = [0.0];
                let _ = decode_real(dtype, raw, &mut out);
                (out[0], 0.0)
            }
        };
        return (0..numel).find(|&i| {
            !close_rule(spec).complex_close(decode(vd, value, i), decode(ed, &spec.expected, i))
        });
    }
    let mut a = [0.0f64; 256];
    let mut e = [0.0f64; 256];
    let mut start = 0;
    while start < numel {
        let n = (numel - start).min(256);
        let va = &value[start * vd.itemsize()..(start + n) * vd.itemsize()];
        let ve = &spec.expected[start * ed.itemsize()..(start + n) * ed.itemsize()];
        if decode_real(vd, va, &mut a[..n]).is_err() || decode_real(ed, ve, &mut e[..n]).is_err() {
            return Some(start);
        }
        if let Some(k) = (0..n).find(|&k| !close_rule(spec).real_close(a[k], e[k])) {
            return Some(start + k);
        }
        start += n;
    }
    None
}

fn check_value(spec: &CheckSpec, log: &CheckLog, replay: u64, value: &[u8]) {
    log.evaluations.fetch_add(1, Ordering::Relaxed);
    let Some(element) = first_mismatch(spec, value) else {
        return;
    };
    log.failures.fetch_add(1, Ordering::Relaxed);
    let word = log.freeze.load(Ordering::Relaxed);
    if word != 0 {
        // SAFETY: the address of the runtime's 8-byte pinned freeze word, owned by the same
        // resources that keep this action alive; the host writes it only atomically.
        let word = unsafe { AtomicU64::from_ptr(word as *mut u64) };
        word.fetch_min(replay, Ordering::SeqCst);
    }
    // try_lock: a reader holding the lock must never stall the driver thread. A failure
    // missed this way is still counted, and it cannot be the first one (a first failure is
    // already recorded whenever the lock is contended by a reader).
    if let Ok(mut first) = log.first.try_lock() {
        if first.is_none() {
            *first = Some(CheckFailure {
                replay,
                name: spec.name.clone(),
                invocation: spec.invocation,
                element: element as u64,
                actual: format_value(spec.dtype, value, element),
                expected: format_value(spec.expected_dtype, &spec.expected, element),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dtype: DType, expected: Vec<u8>, expected_dtype: DType) -> CheckSpec {
        CheckSpec {
            name: "x".into(),
            invocation: 0,
            dtype,
            expected,
            expected_dtype,
            rtol: 1e-5,
            atol: 1e-8,
            equal_nan: false,
        }
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn float_rules() {
        let s = spec(
            DType::Float32,
            f32s(&[1.0, f32::INFINITY, 0.0]),
            DType::Float32,
        );
        assert_eq!(
            first_mismatch(&s, &f32s(&[1.000001, f32::INFINITY, 0.0])),
            None
        );
        assert_eq!(first_mismatch(&s, &f32s(&[1.0, f32::MAX, 0.0])), Some(1));
        assert_eq!(
            first_mismatch(&s, &f32s(&[1.0, f32::INFINITY, 1e-7])),
            Some(2)
        );
        let nan = spec(DType::Float32, f32s(&[f32::NAN]), DType::Float32);
        assert_eq!(first_mismatch(&nan, &f32s(&[f32::NAN])), Some(0));
        let nan_ok = CheckSpec {
            equal_nan: true,
            ..nan
        };
        assert_eq!(first_mismatch(&nan_ok, &f32s(&[f32::NAN])), None);
    }

    #[test]
    fn integers_compare_exactly_beyond_f64() {
        let e = (i64::MAX).to_le_bytes().to_vec();
        let s = spec(DType::Int64, e, DType::Int64);
        assert_eq!(first_mismatch(&s, &(i64::MAX - 1).to_le_bytes()), Some(0));
        assert_eq!(first_mismatch(&s, &i64::MAX.to_le_bytes()), None);
    }

    #[test]
    fn failures_are_sticky_with_replay_and_values() {
        let log = CheckLog::default();
        let s = spec(DType::Float32, f32s(&[1.0, 2.0]), DType::Float32);
        check_value(&s, &log, 1, &f32s(&[1.0, 2.0]));
        check_value(&s, &log, 2, &f32s(&[1.0, 5.0]));
        check_value(&s, &log, 3, &f32s(&[9.0, 2.0]));
        let first = log.first.lock().unwrap().clone().unwrap();
        assert_eq!((first.replay, first.element), (2, 1));
        assert_eq!((first.actual.as_str(), first.expected.as_str()), ("5", "2"));
        assert_eq!(log.failures.load(Ordering::Relaxed), 2);
        assert_eq!(log.evaluations.load(Ordering::Relaxed), 3);
    }
}
