//! Time per element of a host summary (`tcgd_tensor::summarize`) for a few dtypes and
//! sizes: the writer's cost per recorded value when the host summarises it (CPU backend,
//! eager values).
//!
//! The last row reads each value once, from 200 different float32 values of 96 KiB in
//! turn (19 MiB, past this machine's caches): what a probe sees, reading a value the model
//! has just written.
//!
//! `cargo run --release -p tcgd-tensor --example summarize_throughput`

use std::time::Instant;

use tcgd_tensor::{summarize, DType};

fn bytes_of(dtype: DType, numel: usize) -> Vec<u8> {
    // A deterministic spread of values, not all equal (a constant input would flatter
    // nothing here, every element takes the same path either way).
    (0..numel)
        .flat_map(|i| {
            let x = ((i * 7919) % 1000) as f32 / 250.0 - 2.0;
            match dtype {
                DType::Float32 => x.to_le_bytes().to_vec(),
                DType::BFloat16 => ((x.to_bits() >> 16) as u16).to_le_bytes().to_vec(),
                _ => f64::from(x).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

fn main() {
    for (dtype, numel) in [
        (DType::Float32, 64 * 384),
        (DType::Float32, 1 << 20),
        (DType::BFloat16, 4 * 128 * 512),
        (DType::Float64, 1 << 16),
    ] {
        let bytes = bytes_of(dtype, numel);
        let reps = (50_000_000 / numel).max(3);
        summarize(dtype, &bytes).expect("summary");
        let started = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(summarize(dtype, std::hint::black_box(&bytes)).expect("summary"));
        }
        let per = started.elapsed().as_secs_f64() / reps as f64;
        println!(
            "{dtype} x {numel}: {:.1} us per summary, {:.2} ns per element",
            per * 1e6,
            per * 1e9 / numel as f64
        );
    }

    let (numel, values) = (64 * 384, 200);
    let bytes = bytes_of(DType::Float32, numel * values);
    let one = numel * DType::Float32.itemsize();
    let mut per = f64::INFINITY;
    for _ in 0..3 {
        let started = Instant::now();
        for value in bytes.chunks(one) {
            std::hint::black_box(summarize(DType::Float32, value).expect("summary"));
        }
        per = per.min(started.elapsed().as_secs_f64() / values as f64);
    }
    println!(
        "float32 x {numel}, each of {values} values read once: {:.1} us per summary, {:.2} ns \
         per element",
        per * 1e6,
        per * 1e9 / numel as f64
    );
}
