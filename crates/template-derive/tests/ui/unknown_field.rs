use galleon_template_derive::Template;

#[derive(Template)]
#[template(source = "<h1>Hello</h1>\n<p><%= @title %></p>", name = "page.html.eex")]
struct Page {
    name: String,
}

fn main() {}
