use super::*;
use half::f16;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn run(dtype: DType, r: &[u8], c: &[u8], options: &CompareOptions) -> Metrics {
    let n = (r.len() / dtype.itemsize()) as i64;
    compare(
        Values { dtype, bytes: r },
        Values { dtype, bytes: c },
        &[n],
        options,
    )
    .unwrap()
}

/// How many elements mismatched, and the flat index of the first one.
fn mismatches(m: &Metrics) -> (u64, Option<u64>) {
    (m.mismatch_count, m.first_mismatch.as_ref().map(|f| f.index))
}

#[test]
fn allclose_follows_isclose_with_reference_as_other() {
    let o = CompareOptions::default();
    // |c - r| <= atol + rtol * |r|: the tolerance scales with the reference.
    let r = f32s(&[1000.0, 0.0, f32::INFINITY, f32::NAN, -0.0]);
    let c = f32s(&[1000.005, 1e-9, f32::INFINITY, f32::NAN, 0.0]);
    let m = run(DType::Float32, &r, &c, &o);
    assert_eq!(m.mismatch_count, 1, "{m:?}");
    let first = m.first_mismatch.unwrap();
    assert_eq!(first.index, 3);
    assert!(matches!(first.reference, Scalar::Float(x) if x.is_nan()));
    let nan_ok = CompareOptions {
        equal_nan: true,
        ..o.clone()
    };
    assert_eq!(run(DType::Float32, &r, &c, &nan_ok).mismatch_count, 0);
    // The tolerance scales with the reference: 0.8 is within half of 1.8, not of 1.0.
    let half = CompareOptions {
        rtol: 0.5,
        atol: 0.0,
        ..o.clone()
    };
    let (one, more) = (f32s(&[1.0]), f32s(&[1.8]));
    assert_eq!(run(DType::Float32, &one, &more, &half).mismatch_count, 1);
    assert_eq!(run(DType::Float32, &more, &one, &half).mismatch_count, 0);
    // Infinities: equal only to themselves, whatever the tolerance.
    let huge = CompareOptions {
        rtol: 1e300,
        ..o.clone()
    };
    let inf_r = f32s(&[f32::INFINITY, 1.0]);
    let inf_c = f32s(&[1.0, f32::INFINITY]);
    assert_eq!(run(DType::Float32, &inf_r, &inf_c, &huge).mismatch_count, 2);
}

#[test]
fn exact_mode_is_value_equality() {
    let o = CompareOptions {
        mode: Mode::Exact,
        ..CompareOptions::default()
    };
    let r = f32s(&[1.0, -0.0, f32::NAN, 2.0]);
    let c = f32s(&[1.0, 0.0, f32::NAN, 2.000_000_2]);
    let m = run(DType::Float32, &r, &c, &o);
    assert_eq!(mismatches(&m), (2, Some(2)));
    assert_eq!(m.max_ulp_distance, Some(1));
}

#[test]
fn metrics_over_finite_pairs() {
    let r = f32s(&[1.0, 2.0, 4.0, f32::NAN, 0.0]);
    let c = f32s(&[1.0, 2.5, 3.0, 5.0, f32::NEG_INFINITY]);
    let m = run(DType::Float32, &r, &c, &CompareOptions::default());
    assert_eq!(m.total, 5);
    assert_eq!(m.mismatch_count, 4);
    assert_eq!(m.finite_pairs, 3);
    assert_eq!(m.max_abs_error, Some(1.0));
    assert_eq!(m.max_rel_error, Some(0.25));
    assert_eq!(m.mean_abs_error, Some(0.5));
    assert_eq!(m.nan_introduced, 0);
    assert_eq!(m.inf_introduced, 1);
    let dot = 1.0 + 5.0 + 12.0;
    let want = dot / (21f64.sqrt() * (1.0f64 + 6.25 + 9.0).sqrt());
    assert!((m.cosine_similarity.unwrap() - want).abs() < 1e-15);
    assert!((m.relative_l2_error.unwrap() - (1.25f64 / 21.0).sqrt()).abs() < 1e-15);
    let first = m.first_mismatch.unwrap();
    assert_eq!(
        (first.index, first.reference, first.candidate),
        (1, Scalar::Float(2.0), Scalar::Float(2.5))
    );
}

#[test]
fn nan_introduced_counts_new_nans_only() {
    let r = f32s(&[f32::NAN, 1.0, 1.0]);
    let c = f32s(&[f32::NAN, f32::NAN, 1.0]);
    let m = run(DType::Float32, &r, &c, &CompareOptions::default());
    assert_eq!((m.nan_introduced, m.inf_introduced), (1, 0));
}

#[test]
fn integers_are_exact_beyond_f64_precision() {
    let big = (1i64 << 60) + 1;
    let r: Vec<u8> = [big, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let c: Vec<u8> = [big + 1, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let loose = CompareOptions {
        rtol: 0.5,
        ..CompareOptions::default()
    };
    let m = run(DType::Int64, &r, &c, &loose);
    assert_eq!(m.mismatch_count, 1);
    assert_eq!(m.max_abs_error, Some(1.0));
    assert_eq!(m.compared_as, "integer");
    let first = m.first_mismatch.unwrap();
    assert_eq!(first.reference, Scalar::Int(i128::from(big)));
    assert_eq!(first.candidate, Scalar::Int(i128::from(big + 1)));
    // Small integers: tolerances never apply either.
    let m = run(
        DType::Int32,
        &7i32.to_le_bytes(),
        &8i32.to_le_bytes(),
        &loose,
    );
    assert_eq!(m.mismatch_count, 1);
}

#[test]
fn promoted_pairs_compare_values() {
    let r = f32s(&[1.5, 2.0]);
    let c: Vec<u8> = [1.5f64, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let m = compare(
        Values {
            dtype: DType::Float32,
            bytes: &r,
        },
        Values {
            dtype: DType::Float64,
            bytes: &c,
        },
        &[2],
        &CompareOptions::default(),
    )
    .unwrap();
    assert_eq!(m.mismatch_count, 0);
    assert_eq!(m.max_ulp_distance, None);
    let ints: Vec<u8> = [3i64, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    let floats = f32s(&[3.0, 4.5]);
    let m = compare(
        Values {
            dtype: DType::Int64,
            bytes: &ints,
        },
        Values {
            dtype: DType::Float32,
            bytes: &floats,
        },
        &[2],
        &CompareOptions::default(),
    )
    .unwrap();
    assert_eq!((m.mismatch_count, m.compared_as), (1, "float64"));
}

#[test]
fn complex_uses_modulus_and_either_part_nan() {
    let pack = |v: &[(f32, f32)]| -> Vec<u8> {
        v.iter()
            .flat_map(|(a, b)| a.to_le_bytes().into_iter().chain(b.to_le_bytes()))
            .collect()
    };
    let r = pack(&[(3.0, 4.0), (f32::NAN, 1.0), (1.0, 1.0)]);
    let c = pack(&[(3.0, 4.000_01), (1.0, f32::NAN), (1.0, 2.0)]);
    let o = CompareOptions {
        equal_nan: true,
        ..CompareOptions::default()
    };
    let m = run(DType::Complex64, &r, &c, &o);
    assert_eq!(mismatches(&m), (1, Some(2)));
    assert_eq!(m.max_abs_error, Some(1.0));
}

#[test]
fn ulp_distances_in_each_format() {
    let one = f16::from_f32(1.0).to_bits();
    let r: Vec<u8> = [one, 0x8000].iter().flat_map(|v| v.to_le_bytes()).collect();
    let c: Vec<u8> = [one + 3, 0x0001]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let m = run(DType::Float16, &r, &c, &CompareOptions::default());
    assert_eq!(m.max_ulp_distance, Some(3));
    // Opposite signs count through zero; infinities are excluded.
    let fmt = UlpFormat::of(DType::Float32).unwrap();
    assert_eq!(
        fmt.max_distance(
            &f32s(&[-f32::from_bits(1)]),
            &f32s(&[f32::from_bits(1)]),
            Simd::detect()
        ),
        2
    );
    assert_eq!(
        fmt.max_distance(&f32s(&[f32::INFINITY]), &f32s(&[1.0]), Simd::Portable),
        0
    );
    let e8 = UlpFormat::of(DType::Float8E8M0Fnu).unwrap();
    assert_eq!(e8.max_distance(&[10, 0xFF], &[7, 1], Simd::detect()), 3);
    let fnuz = UlpFormat::of(DType::Float8E4M3Fnuz).unwrap();
    assert_eq!(
        fnuz.max_distance(&[0x80, 0x81], &[0x01, 0x01], Simd::Portable),
        2
    );
}

#[test]
fn parallel_tasks_match_sequential_and_find_the_first_mismatch() {
    let n = 3 * TASK + 17;
    let r: Vec<f32> = (0..n).map(|i| (i as f32).sin()).collect();
    let mut c = r.clone();
    c[2 * TASK + 5] += 1.0;
    c[TASK + 3] = f32::NAN;
    let m = run(
        DType::Float32,
        &f32s(&r),
        &f32s(&c),
        &CompareOptions::default(),
    );
    assert_eq!(mismatches(&m), (2, Some((TASK + 3) as u64)));
    assert_eq!(m.nan_introduced, 1);
    assert_eq!(m.finite_pairs, n as u64 - 1);
    let again = run(
        DType::Float32,
        &f32s(&r),
        &f32s(&c),
        &CompareOptions::default(),
    );
    assert_eq!(format!("{m:?}"), format!("{again:?}"));
}

#[test]
fn extreme_magnitudes_keep_norms_finite() {
    let r: Vec<u8> = [1e300f64, -1e300]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let c: Vec<u8> = [1e300f64, 1e300]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let m = run(DType::Float64, &r, &c, &CompareOptions::default());
    assert_eq!(m.cosine_similarity, Some(0.0));
    assert!((m.relative_l2_error.unwrap() - 2f64.sqrt()).abs() < 1e-12);
    assert!((m.mean_abs_error.unwrap() - 1e300).abs() / 1e300 < 1e-12);
    let tiny: Vec<u8> = [1e-200f64, 2e-200]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let m = run(DType::Float64, &tiny, &tiny, &CompareOptions::default());
    assert!((m.cosine_similarity.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(m.relative_l2_error, Some(0.0));
}

#[test]
fn vector_and_portable_loops_agree_bit_for_bit() {
    let specials = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1e300,
        1e-310,
    ];
    let n = 3 * BLOCK + 13;
    let r: Vec<f64> = (0..n)
        .map(|i| match i % 97 {
            k if k < specials.len() => specials[k],
            _ => (i as f64 * 0.37).sin() * 10f64.powi((i % 13) as i32 - 6),
        })
        .collect();
    let c: Vec<f64> = r
        .iter()
        .enumerate()
        .map(|(i, &x)| match i % 5 {
            0 => x * (1.0 + 1e-6),
            1 => specials[i % specials.len()],
            _ => x,
        })
        .collect();
    let bytes = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let (rb, cb) = (bytes(&r), bytes(&c));
    let reference = Values {
        dtype: DType::Float64,
        bytes: &rb,
    };
    let candidate = Values {
        dtype: DType::Float64,
        bytes: &cb,
    };
    let ulp = UlpFormat::of(DType::Float64);
    for equal_nan in [false, true] {
        let rule = Rule {
            atol: 1e-8,
            rtol: 1e-5,
            equal_nan,
        };
        let run = |simd| {
            let acc = if equal_nan {
                real_task_body::<true, true>(reference, candidate, 0..n, rule, ulp, simd)
            } else {
                real_task_body::<true, false>(reference, candidate, 0..n, rule, ulp, simd)
            };
            format!("{:?}", acc.unwrap())
        };
        assert_eq!(run(Simd::Portable), run(Simd::detect()));
    }
}

#[test]
fn unravel_is_row_major() {
    assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
    assert_eq!(unravel(0, &[]), Vec::<u64>::new());
    assert_eq!(unravel(7, &[2, 2, 2]), vec![1, 1, 1]);
}
