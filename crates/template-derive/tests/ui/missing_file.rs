use galleon_template_derive::Template;

#[derive(Template)]
#[template(path = "templates/does-not-exist.html.eex")]
struct Missing {}

fn main() {}
