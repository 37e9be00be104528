use super::*;

#[test]
fn longs_decode_as_python_does() {
    assert_eq!(long_from_bytes(&[]), PickleValue::Int(0));
    assert_eq!(long_from_bytes(&[0xff]), PickleValue::Int(-1));
    assert_eq!(long_from_bytes(&[0x00, 0x80]), PickleValue::Int(-32768));
    assert_eq!(
        long_from_bytes(&[0x00, 0x80, 0x00]),
        PickleValue::Int(32768)
    );
    // 2**63 needs a ninth byte for the sign: out of range.
    assert_eq!(
        long_from_bytes(&[0, 0, 0, 0, 0, 0, 0, 0x80, 0]),
        PickleValue::BigInt
    );
    assert_eq!(
        long_from_bytes(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        PickleValue::Int(i64::MAX)
    );
    assert_eq!(
        long_from_bytes(&[0, 0, 0, 0, 0, 0, 0, 0x80]),
        PickleValue::Int(i64::MIN)
    );
    assert_eq!(
        long_from_bytes(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        PickleValue::Int(-1)
    );
    assert_eq!(
        long_from_bytes(&[1, 0, 0, 0, 0, 0, 0, 0, 1]),
        PickleValue::BigInt
    );
}

#[test]
fn refuses_code_before_reading_further() {
    // protocol 2: GLOBAL 'os\nsystem\n', then garbage that must never be reached.
    let data = b"\x80\x02cos\nsystem\n\xff\xff";
    match parse(data) {
        Err(PickleError::Unsafe { name, offset, .. }) => {
            assert_eq!(name, "GLOBAL");
            assert_eq!(offset, 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncated_input_is_an_error() {
    assert!(matches!(
        parse(b"\x80\x04\x8c\x05ab"),
        Err(PickleError::Malformed { .. })
    ));
    assert!(matches!(parse(b""), Err(PickleError::Malformed { .. })));
    assert!(matches!(
        parse(b"\x80\x04N"),
        Err(PickleError::Malformed { .. })
    ));
}
