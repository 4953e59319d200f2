// An integration test binary: cargo runs it after the unit tests, as a separate report.
#[test]
fn calls_add() {
    assert_eq!(sample::add(1, 1), 2);
}

#[cfg(feature = "panic_outside")]
#[test]
fn aborts() {
    // The test binary dies without finishing its report.
    std::process::abort();
}
