//! Comparison engine for recorded tensors.
