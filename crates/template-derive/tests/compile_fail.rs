//! Template errors are compile errors, in the runtime engine's format (name:line:column, the
//! source line and a caret).

#[test]
fn template_errors_fail_the_build() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
