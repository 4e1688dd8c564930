//! What a template makes of the build: template errors are compile errors, in the runtime
//! engine's format (name:line:column, the source line and a caret); a template that is not
//! compiled natively names the construct that made it so, both where the runtime engine then
//! needs `serde::Serialize` fields and where `#[template(native)]` refuses it (`tests/ui`); and
//! `native` templates that compile natively build and render (`tests/pass`).

#[test]
fn template_errors_fail_the_build() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/pass/*.rs");
}
