use galleon_template_derive::Template;

#[derive(Template)]
#[template(source = "<p>\n<%= @x </p>", name = "p.html.eex")]
struct P {
    x: i64,
}

fn main() {}
