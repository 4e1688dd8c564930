// `native` refuses the runtime engine: a template that is not compiled natively is a build
// error naming the expression, not a slower render.
use galleon_template_derive::Template;

#[derive(Template)]
#[template(
    source = "<h1>Hello</h1>\n<p><%= String.upcase(@name) %></p>",
    name = "hello.html.eex",
    native
)]
struct Hello {
    name: String,
}

fn main() {}
