use super::*;

#[test]
fn structs_match_the_kernel_layout() {
    assert_eq!(std::mem::size_of::<DeviceRecord>(), 112);
    assert_eq!(std::mem::size_of::<SummarySiteArg>(), 48);
    assert_eq!(
        std::mem::size_of::<SummaryBatchArg>(),
        80 + 48 * MAX_SITES_PER_LAUNCH
    );
    assert_eq!(std::mem::size_of::<CopySiteArg>(), 40);
    assert_eq!(
        std::mem::size_of::<CopyBatchArg>(),
        40 + 40 * MAX_SITES_PER_LAUNCH
    );
}

#[test]
fn the_kernel_source_carries_exact_float8_tables() {
    let source = kernel_source();
    assert!(!source.contains("@FLOAT8_TABLES@"));
    // e4m3fn 0x7e is 448.0 (the largest finite value).
    assert!(source.contains(&format!("0x{:016x}ULL", 448.0f64.to_bits())));
}

#[test]
fn the_kernels_compile_for_hopper_when_nvrtc_is_here() {
    crate::nvrtc::tests::register_venv_nvrtc();
    let defines = [format!("MAX_SITES={MAX_SITES_PER_LAUNCH}")];
    match compile_ptx(&kernel_source(), "tcgd_kernels.cu", 90, &defines) {
        Ok(ptx) => {
            let text = String::from_utf8_lossy(&ptx);
            if let Ok(p) = std::env::var("TCGD_DUMP_PTX") {
                std::fs::write(p, &ptx).unwrap();
            }
            assert!(text.contains(".entry tcgd_summarize"));
            assert!(text.contains(".entry tcgd_copy_ring"));
        }
        Err(CudaError::NoCompiler { .. }) => {}
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_record_becomes_the_stores_summary() {
    let record = DeviceRecord {
        counts: tcgd_tensor::ElementCounts {
            numel: 4,
            nan: 1,
            finite: 3,
            ..Default::default()
        },
        min: 1.0,
        max: 3.0,
        mean: 2.0,
        m2: 2.0,
        ssq: 14.0,
        ..DeviceRecord::default()
    };
    let s = record.to_summary();
    assert_eq!(s.mean, Some(2.0));
    assert!((s.std.unwrap() - (2.0f64 / 3.0).sqrt()).abs() < 1e-15);
    assert!((s.l2_norm - 14f64.sqrt()).abs() < 1e-15);
    assert_eq!(s.nan_count, 1);
}

#[test]
fn blocks_grow_with_the_launch_up_to_a_bound() {
    let sms = 132;
    // A small value alone: 8 KiB blocks, spread over SMs.
    assert_eq!(blocks_for(512 << 10, 512 << 10, sms), 64);
    // 16 values of 4 MiB together: one wave of 4 blocks per SM holds the launch.
    let launch = 16 * (4u64 << 20);
    let per_site = blocks_for(4 << 20, launch, sms);
    assert_eq!(per_site, 34);
    assert!(16 * per_site as u64 <= 4 * sms as u64 + 16);
    // Huge launches: 128 KiB blocks, several waves.
    assert_eq!(blocks_for(64 << 20, 16 * (64u64 << 20), sms), 512);
    // An empty value still gets its block (it writes the record).
    assert_eq!(blocks_for(0, 0, sms), 1);
}
